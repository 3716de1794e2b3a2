"""Domain errors. Each says what is wrong and, where possible, what to do about it.

The CLI prints any ``IdynError`` as one line without a traceback; anything else is a bug.
"""


class IdynError(Exception):
    """Base class for errors a user can fix (bad input, wrong robot, bad parameter)."""


class UnknownRobotError(IdynError, KeyError):
    """A robot name that is neither a known preset nor a URDF path."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class RobotDescriptionError(IdynError):
    """A URDF/xacro that cannot be used (bad inertia, missing joint, parse error)."""


class DatasetError(IdynError):
    """A recording or dataset that cannot be read or does not fit the robot."""


class BagReadError(DatasetError):
    """A rosbag2 file that cannot be read (truncated, missing metadata, unknown type)."""


class IdentificationError(IdynError):
    """Identification impossible (too few samples, rank-deficient excitation)."""


class TrainingError(IdynError):
    """A fit whose result must not be used (e.g. its predictions blow up on held-out data)."""


class ModelArtifactError(IdynError):
    """An exported model that does not match the configured robot, rate or format."""


class ParameterError(IdynError, ValueError):
    """A node or CLI parameter outside its valid range."""
