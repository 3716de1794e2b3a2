"""Definition of Callar's rotational displacement r (numbers only, no torch: the 1 kHz path imports it).

r_j is the signed joint travel q_j - q_j(last reversal) since the last reversal of the motion direction of
joint j, clipped to +-R_LIMIT (Callar 2021 Sec. 4.2: "signed rotation since the last sign change of
Delta q", saturating where the gear hysteresis saturates). A reversal counts only once the joint has come
back R_DEADBAND from its furthest point, so encoder noise near a turning point does not reset r; r is 0
until the joint has first moved R_DEADBAND.

Decision: r from q travel, not from integrated dq: the thesis defines it on Delta q, q is the measured
signal, and it makes r independent of how dq was estimated and of the sample rate.

Implementations with identical semantics (a test runs both on the same trajectories):
- numpy, per tick, allocation-free: ``idyn_ros.control.state_estimation.RotationalDisplacement``;
- torch, sequences and the exported ONNX step: ``idyn_ros.models.zoo.rotational_displacement`` /
  ``rotational_displacement_step``.
"""

from __future__ import annotations

import math

R_LIMIT = math.radians(10.0)  # rad; Callar 2021 Sec. 4.2: r saturates at +-10 deg (hysteresis saturation)
R_DEADBAND = 1e-4  # rad (~0.006 deg); the thesis gives none. Decision: above encoder noise, below any real motion
# Version of the r definition; stored in model.pt, checkpoints and the artifact so weights trained with another
# r are refused (1 = sign-of-dq integral, 2 = q travel since the last reversal).
R_FEATURE_VERSION = 2
