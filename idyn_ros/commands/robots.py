"""List the built-in robots, or print one robot's URDF as rendered from its xacro.

Examples:
  idyn robots                          # table: name, DoF, joints, flange, effort limits
  idyn robots panda --urdf > panda.urdf
  idyn robots ur5 --urdf --mode hardware --prefix left_
"""

from __future__ import annotations

import argparse

HELP = "list built-in robots or print a robot's URDF"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("robot", nargs="?", help="robot name (panda, iiwa14, ur5); omit to list all")
    parser.add_argument("--urdf", action="store_true", help="print the rendered URDF to stdout")
    parser.add_argument("--mode", default=None, help="with --urdf: ros2_control mode: mock|mujoco|gazebo|hardware "
                        "(default mock)")
    parser.add_argument("--prefix", default=None, help="with --urdf: joint/link name prefix (default: the vendor's)")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from idyn_ros.dynamics import RobotModel
    from idyn_ros.errors import ParameterError
    from idyn_ros.robots import ROBOT_NAMES, get_robot, render_urdf

    if args.urdf and not args.robot:
        raise ParameterError(f"--urdf needs a robot: `idyn robots ROBOT --urdf` (robots: {', '.join(ROBOT_NAMES)})")
    unused = [o for o, v in (("--mode", args.mode), ("--prefix", args.prefix)) if v is not None]
    if unused and not args.urdf:  # the table does not use them
        raise ParameterError(f"{' and '.join(unused)}: only for the printed URDF; add --urdf")
    if args.urdf:
        print(render_urdf(args.robot, mode=args.mode or "mock", prefix=args.prefix))
        return 0
    names = [args.robot] if args.robot else list(ROBOT_NAMES)
    for name in names:
        spec = get_robot(name)
        model = RobotModel.from_robot(name)
        print(f"{name}: {model.n} DoF, flange '{spec.flange_link}', controller '{spec.effort_controller}'")
        print(f"  joints:        {', '.join(model.joint_names)}")
        print(f"  effort (Nm):   {np.array2string(model.effort_limit, precision=0, separator=', ')}")
        print(f"  velocity (r/s):{np.array2string(model.velocity_limit, precision=2, separator=', ')}")
        print(f"  mass (kg):     {model.inertial_parameters()[:, 0].sum():.2f} (moving links)")
        print(f"  source:        {spec.source}")
    return 0
