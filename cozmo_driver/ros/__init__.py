"""ROS 2 nodes: the glue between the robot client and ROS interfaces (rclpy)."""
