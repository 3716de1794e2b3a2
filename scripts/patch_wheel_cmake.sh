#!/usr/bin/env bash
# Gap 3 of ../shared/notes/ros2-wheels.md: the wheels' generated-Python CMake export files point at
# the include dirs of the machine that built the wheels. Rewrite them to this interpreter's include
# dir and numpy's, before anything configures against them with CMake (idempotent).
# Usage: scripts/patch_wheel_cmake.sh VENV
set -euo pipefail
VENV="$(cd "$1" && pwd)"
PY="$VENV/bin/python"
PY_INCLUDE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INCLUDE="$("$PY" -c 'import numpy; print(numpy.get_include())')"
for f in "$VENV"/share/*/cmake/export_*__rosidl_generator_pyExport.cmake; do
  [ -f "$f" ] || continue
  sed -i -E \
    -e "s#/opt/python/cp311-cp311/include/python3\.11#${PY_INCLUDE}#g" \
    -e "s#[^;\"]*/numpy/_core/include#${NP_INCLUDE}#g" \
    "$f"
done
