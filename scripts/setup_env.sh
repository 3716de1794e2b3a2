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

inputs_hash() {
  cat requirements.in requirements.lock setup.py pyproject.toml package.xml CMakeLists.txt \
      scripts/setup_env.sh scripts/build_msgs.sh msg/*.msg srv/*.srv 2>/dev/null | sha256sum | cut -c1-16
}

verify() {
  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$VENV/bin/python" - <<'PY'
import importlib
for module in ("rclpy", "idyn_ros", "idyn_ros.msg", "idyn_ros.srv", "pinocchio", "mujoco",
               "onnxruntime", "rosbags.rosbag2"):
    importlib.import_module(module)
PY
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
"$VENV/bin/python" -m pip check >/dev/null || { "$VENV/bin/python" -m pip check; exit 1; }

echo "setup: building msg/ and srv/ into the venv prefix"
bash scripts/build_msgs.sh "$VENV"

echo "setup: installing idyn_ros (editable)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    --config-settings editable_mode=compat -e .

verify
echo "$HASH" > "$STAMP"
echo "setup: done ($HASH)"
