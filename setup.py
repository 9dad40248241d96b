"""Packaging of the cozmo_driver ROS 2 package (ament_python).

Works both under colcon (ament_python build type) and with plain pip
(`pip install -e .` in the wheel venv that `./dev setup` creates): nothing
here imports ament or ROS.
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = "cozmo_driver"

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench", "bench.*", "tools", "tools.*"]),
    # The built-in animations (our YAML clip format) and the behavior engine's default
    # configuration, loaded from the package directory.
    package_data={"cozmo_driver.anim": ["builtin/*.yaml"],
                  "cozmo_driver.behavior": ["default_config.yaml"]},
    data_files=[
        # Marker that makes the package visible in the ament resource index.
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
        ("share/" + PACKAGE_NAME + "/launch", sorted(glob("launch/*.py"))),
        ("share/" + PACKAGE_NAME + "/config", sorted(glob("config/*.yaml"))),
    ],
    install_requires=["numpy", "Pillow", "PyYAML", "xacro"],
    zip_safe=False,
    python_requires=">=3.10",
    maintainer="cozmo_driver maintainers",
    maintainer_email="maintainers@cozmo-driver.invalid",
    description="ROS 2 driver for the Anki Cozmo robot over its Wi-Fi UDP protocol.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "cozmo-demo = cozmo_driver.tool_scripts:demo",
            "cozmo-protocol-demo = cozmo_driver.tool_scripts:protocol_demo",
            "cozmo-sim = cozmo_driver.tool_scripts:sim",
            "cozmo_driver_node = cozmo_driver.ros.entry_points:driver_node",
            "cozmo_face_node = cozmo_driver.ros.entry_points:face_node",
            "cozmo_behavior_node = cozmo_driver.ros.entry_points:behavior_node",
            "cozmo_bringup = cozmo_driver.tool_scripts:bringup",
            "cozmo_description_publisher = cozmo_driver.ros.entry_points:description_publisher",
            "cozmo_stack = cozmo_driver.ros.entry_points:stack",
        ],
    },
)
