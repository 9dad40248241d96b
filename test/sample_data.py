"""Data files the tests of several folders share, as text."""

#: a camera_calibration_parsers YAML file of a 320x240 camera (distinct values in every field)
CAMERA_YAML = """\
image_width: 320
image_height: 240
camera_name: cozmo_camera
camera_matrix:
  rows: 3
  cols: 3
  data: [300.0, 0.0, 158.0, 0.0, 301.0, 121.0, 0.0, 0.0, 1.0]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [0.01, -0.02, 0.0, 0.0, 0.003]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
projection_matrix:
  rows: 3
  cols: 4
  data: [300.0, 0.0, 158.0, 0.0, 0.0, 301.0, 121.0, 0.0, 0.0, 0.0, 1.0, 0.0]
"""
