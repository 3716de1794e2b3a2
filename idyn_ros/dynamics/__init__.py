"""dynamics layer: pinocchio-backed rigid-body model, regressors, base parameters, inertia checks.

The torch RNEA (:mod:`idyn_ros.dynamics.torch_rnea`) is NOT imported here so that importing
``idyn_ros.dynamics`` never pulls in torch (the runtime/control/nodes layers use this package).
"""

from idyn_ros.dynamics.model import INERTIAL_PARAMETER_NAMES, RobotModel

__all__ = ["INERTIAL_PARAMETER_NAMES", "RobotModel"]
