#!/usr/bin/env bash
# Build the package's msg/ and srv/ with rosidl against the ROS 2 PyPI wheels and install the
# generated interfaces into the venv prefix (then nothing is needed at run time).
# Usage: scripts/build_msgs.sh VENV
# The three gaps this closes are described in ../shared/notes/ros2-wheels.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(cd "$1" && pwd)"
BUILD="$ROOT/build/msgs"
PY="$VENV/bin/python"

# Gap 3: the wheels' CMake export files name the wheel build machine's include dirs.
bash "$ROOT/scripts/patch_wheel_cmake.sh" "$VENV"

mkdir -p "$BUILD"
# Gap 2: AMENT_PREFIX_PATH must name the venv at configure time.
export AMENT_PREFIX_PATH="$VENV"
export PATH="$VENV/bin:$PATH"
cmake -S "$ROOT" -B "$BUILD" -Wno-dev \
  -DCMAKE_INSTALL_PREFIX="$VENV" \
  -DCMAKE_PREFIX_PATH="$VENV" \
  -DPython3_EXECUTABLE="$PY" \
  -DIDYN_INTERFACES_ONLY=ON \
  -DBUILD_TESTING=OFF >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" >"$BUILD/build.log" 2>&1 || { tail -50 "$BUILD/build.log"; exit 1; }
cmake --install "$BUILD" >"$BUILD/install.log" 2>&1 || { tail -50 "$BUILD/install.log"; exit 1; }

# The generated interfaces land in site-packages/idyn_ros/{msg,srv}. The library itself is the
# editable source tree; idyn_ros/__init__.py extends its __path__ to this folder. A package
# __init__.py here would shadow the source tree, so none may exist.
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
rm -f "$SITE/idyn_ros/__init__.py"
# rosidl also registers an egg-info distribution named idyn_ros; pip would take it for a previous
# install of the library and delete the generated modules when installing the editable package.
rm -rf "$SITE"/idyn_ros-*.egg-info
rm -rf "$SITE/idyn_ros/__pycache__"
echo "built interfaces: $(ls "$SITE/idyn_ros/msg" | grep -c '^_.*\.py$') message modules, $(ls "$SITE/idyn_ros/srv" 2>/dev/null | grep -c '^_.*\.py$') service modules"
