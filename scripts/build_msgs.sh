#!/usr/bin/env bash
# Build the package's msg/ and srv/ with rosidl against the ROS 2 PyPI wheels and install the
# generated interfaces into the venv prefix (then nothing is needed at run time).
# Usage: scripts/build_msgs.sh VENV
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(cd "$1" && pwd)"
BUILD="$ROOT/build/msgs"
PY="$VENV/bin/python"

bash "$ROOT/scripts/build_interfaces.sh" "$VENV" "$ROOT" "$BUILD" "$VENV" -DIDYN_INTERFACES_ONLY=ON

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
