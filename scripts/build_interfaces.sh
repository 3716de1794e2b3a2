#!/usr/bin/env bash
# Build one ROS 2 interface package (msg/, srv/ via rosidl) against the venv's ROS 2 PyPI wheels and install it
# into PREFIX. The gaps this closes are in ../shared/notes/ros2-wheels.md. Logs: BUILD/{configure,build,install}.log.
# Usage: scripts/build_interfaces.sh VENV SOURCE BUILD PREFIX [extra cmake -D arguments]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(cd "$1" && pwd)"
SOURCE="$2"
BUILD="$3"
PREFIX="$4"
shift 4

# Gap 3: the wheels' CMake export files name the wheel build machine's include dirs.
bash "$ROOT/scripts/patch_wheel_cmake.sh" "$VENV"

mkdir -p "$BUILD"
# Gap 2: AMENT_PREFIX_PATH must name the venv at configure time.
export AMENT_PREFIX_PATH="$VENV"
export PATH="$VENV/bin:$PATH"
cmake -S "$SOURCE" -B "$BUILD" -Wno-dev \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DCMAKE_PREFIX_PATH="$VENV" \
  -DPython3_EXECUTABLE="$VENV/bin/python" \
  -DBUILD_TESTING=OFF "$@" >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" >"$BUILD/build.log" 2>&1 || { tail -50 "$BUILD/build.log"; exit 1; }
cmake --install "$BUILD" >"$BUILD/install.log" 2>&1 || { tail -50 "$BUILD/install.log"; exit 1; }
