"""ros2 launch idyn_ros ur5.launch.py mode:=hardware|mock|gazebo|mujoco [model:=PATH] [gains:=soft|medium|stiff] ...

Everything is in idyn_common.py (shared by the three robots; its docstring lists the arguments, and so does
``--show-args``); parameters in config/ur5.yaml.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from idyn_common import generate


def generate_launch_description():
    return generate("ur5")
