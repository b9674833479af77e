"""petdaq-calibrate: the scanner's calibration tables (DESIGN section 3) from its own data."""


class CalibrationError(Exception):
    """Input that cannot give a table: the message names the file, DU or crystal."""
