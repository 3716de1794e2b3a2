#!/usr/bin/env bash
# Build (or refresh) the project's virtual environment: pinned wheels, msg/ built with rosidl into
# the venv prefix, the package installed editable. Idempotent: a stamp holds a hash of every input,
# and a second run with nothing changed only verifies imports (a few seconds).
#
#   scripts/setup_env.sh            # what `make setup` runs
#   FORCE=1 scripts/setup_env.sh    # rebuild msg/ and reinstall even if nothing changed
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${IDYN_VENV:-$ROOT/.venv}"
STAMP="$VENV/.idyn-setup-stamp"
cd "$ROOT"

find_python() {
  for candidate in "${PYTHON:-}" python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "setup: Python 3.11 is required (the ROS 2 Kilted wheels are built for cp311); set PYTHON=/path/to/python3.11" >&2
  return 1
}

# The real ros2 launch / launch_ros / ros2 CLI, built as wheels from their public sources (their README says how).
# Without this folder (a machine with a ROS 2 install) nothing of this is installed: the install provides it.
ROS2_WHEELS="${IDYN_ROS2_WHEELS:-$ROOT/../shared/wheels/ros2-kilted}"
LAUNCH_WHEELS="launch-3.7.1 launch_ros-0.28.0 launch_xml-3.7.1 launch_yaml-3.7.1 ros2cli-0.36.1 ros2launch-0.28.0
  ros2lifecycle-0.36.1 ros2node-0.36.1 ros2param-0.36.1 ros2pkg-0.36.1 ros2run-0.36.1 ros2service-0.36.1
  ros2topic-0.36.1 rosidl_runtime_py-0.14.0"
# launch_ros asks for `ament-index-python`; the venv has that module as `ros-ament-index-python`
KNOWN_PIP_CHECK="launch-ros 0.28.0 requires ament-index-python, which is not installed."

inputs_hash() {
  { cat requirements.in requirements.lock setup.py pyproject.toml package.xml CMakeLists.txt \
        scripts/setup_env.sh scripts/build_msgs.sh scripts/build_interfaces.sh scripts/patch_wheel_cmake.sh msg/*.msg srv/*.srv 2>/dev/null
    find launch config urdf -type f | sort
    [ -d "$ROS2_WHEELS" ] && ls -l "$ROS2_WHEELS"; } | sha256sum | cut -c1-16
}

install_launch_stack() {
  if [ ! -d "$ROS2_WHEELS" ]; then
    echo "setup: no $ROS2_WHEELS: ros2 launch and the ros2 CLI come from your ROS 2 install"
    return 0
  fi
  echo "setup: installing ros2 launch, launch_ros and the ros2 CLI from $ROS2_WHEELS"
  local files=()
  for w in $LAUNCH_WHEELS; do
    local f="$ROS2_WHEELS/$w-py3-none-any.whl"
    [ -f "$f" ] || { echo "setup: $f missing (expected wheels: $LAUNCH_WHEELS)" >&2; return 1; }
    files+=("$f")
  done
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check osrf-pycommon psutil -c requirements.lock \
    2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${files[@]}"
  if [ ! -f "$VENV/share/composition_interfaces/package.xml" ]; then  # launch_ros imports it (an msg package)
    local build="$ROOT/build/composition_interfaces"
    rm -rf "$build" && mkdir -p "$build"
    tar -xzf "$ROS2_WHEELS/composition_interfaces-2.2.0-src.tar.gz" -C "$build"
    bash "$ROOT/scripts/build_interfaces.sh" "$VENV" "$build/composition_interfaces" "$build/build" "$VENV" || return 1
  fi
}

# What launch_ros and `ros2 run` look for under an ament prefix: <prefix>/lib/idyn_ros/<executable> and the share
# files under <prefix>/share/idyn_ros (file symlinks into this checkout: launch_ros walks the share folder without
# following directory symlinks, and editing a launch or config file then needs no reinstall).
install_ament_layout() {
  local lib="$VENV/lib/idyn_ros" share="$VENV/share/idyn_ros"
  mkdir -p "$lib" "$share"
  for node in joint_state_buffer feedforward controller doomed wrench_observer reference payload_identifier \
      gripper_compensation plant recorder composed; do
    printf '#!%s\nimport sys\nfrom idyn_ros.nodes.start import run_node\nsys.exit(run_node("%s"))\n' \
      "$VENV/bin/python" "$node" > "$lib/$node"
    chmod +x "$lib/$node"
  done
  rm -rf "$share/launch" "$share/config" "$share/urdf"
  find launch config urdf -type f ! -name '*.pyc' | while read -r f; do
    mkdir -p "$share/$(dirname "$f")"
    ln -sf "$ROOT/$f" "$share/$f"
  done
}

# `source .venv/bin/activate` then names the venv as an ament prefix, so `ros2 launch idyn_ros ...` and `ros2 run
# idyn_ros ...` find the package (a ROS 2 install's setup.bash does the same for its own prefix). Once per venv.
ACTIVATE_MARK="# idyn_ros: the venv is an ament prefix (scripts/setup_env.sh)"
ament_prefix_in_activate() {
  grep -qxF "$ACTIVATE_MARK" "$VENV/bin/activate" && return 0
  cat >> "$VENV/bin/activate" <<SH

$ACTIVATE_MARK
case ":\${AMENT_PREFIX_PATH:-}:" in
  *":\$VIRTUAL_ENV:"*) ;;
  *) export AMENT_PREFIX_PATH="\$VIRTUAL_ENV\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}" ;;
esac
SH
}

verify() {
  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$VENV/bin/python" - <<'PY'
import importlib
for module in ("rclpy", "idyn_ros", "idyn_ros.msg", "idyn_ros.srv", "pinocchio", "mujoco",
               "onnxruntime", "rosbags.rosbag2"):
    importlib.import_module(module)
PY
  if [ -d "$ROS2_WHEELS" ]; then
    AMENT_PREFIX_PATH="$VENV" "$VENV/bin/python" -c "import launch_ros.actions, ros2launch" || return 1
    [ -x "$VENV/lib/idyn_ros/controller" ] && [ -f "$VENV/share/idyn_ros/launch/panda.launch.py" ] || return 1
    grep -q run_node "$VENV/lib/idyn_ros/controller" || return 1  # executables of an older layout
  fi
  grep -qxF "$ACTIVATE_MARK" "$VENV/bin/activate"
}

HASH="$(inputs_hash)"
if [ -z "${FORCE:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ] && verify 2>/dev/null; then
  echo "setup: .venv is up to date ($HASH)"
  exit 0
fi

PY="$(find_python)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi

echo "setup: installing pinned dependencies (requirements.in constrained by requirements.lock)"
# torch is pinned to the CPU wheel that lies on this disk (an open range would pull a CUDA build).
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r requirements.in -c requirements.lock 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
pip_status=${PIPESTATUS[0]}
[ "$pip_status" -eq 0 ] || { echo "setup: pip install failed ($pip_status)" >&2; exit "$pip_status"; }
# before any CMake configure (composition_interfaces below, msg/ after): the wheels name foreign include dirs
bash scripts/patch_wheel_cmake.sh "$VENV"
install_launch_stack
check="$("$VENV/bin/python" -m pip check 2>&1 | grep -vxF "$KNOWN_PIP_CHECK" | grep -v "^No broken requirements" || true)"
[ -z "$check" ] || { echo "setup: pip check: $check" >&2; exit 1; }

echo "setup: building msg/ and srv/ into the venv prefix"
bash scripts/build_msgs.sh "$VENV"

echo "setup: installing idyn_ros (editable)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    --config-settings editable_mode=compat -e .

install_ament_layout
ament_prefix_in_activate

verify
echo "$HASH" > "$STAMP"
echo "setup: done ($HASH)"
