"""Calibration of astra's models from a user's own measurements (``astra calibrate``)."""
