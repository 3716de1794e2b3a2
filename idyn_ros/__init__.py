"""idyn_ros: learned inverse-dynamics feedforward for torque-controlled robot arms.

Layers (imports only point down): robots -> dynamics -> data -> models -> runtime -> control -> sim
-> nodes -> cli. ``runtime``, ``control`` and ``nodes`` never import torch.
"""

from pkgutil import extend_path

# The generated ROS interfaces (idyn_ros.msg, idyn_ros.srv) are installed by rosidl into
# site-packages/idyn_ros, while the library is the source tree: let both folders form one package.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
