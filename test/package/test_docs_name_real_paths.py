"""Every repository file a docstring, comment or document names exists (a pointer to a moved study or a renamed
module is a dead end for a reader)."""

from __future__ import annotations

import glob
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("idyn_ros", "config", "docs", "studies", "test", "urdf", "launch", "scripts", "bench", "msg", "srv")
# a path: a top-level folder, then segments, ending in a file extension (module names and ROS type names such as
# idyn_ros/ControllerState are not files)
_EXTENSIONS = "py|md|yaml|yml|json|xacro|msg|srv|sh|png|npz|txt|onnx"
PATH = re.compile(rf"(?<![\w/.:])((?:{'|'.join(TOP)})/[\w.<>*/-]*\.(?:{_EXTENSIONS}))\b")
SOURCES = ("idyn_ros/**/*.py", "launch/*.py", "studies/**/*.py", "studies/**/*.md", "docs/*.md", "*.md",
           "urdf/*.md", "config/**/*.md", "config/**/*.yaml", "Makefile", "scripts/*.sh")


def _exists(name: str) -> bool:
    candidates = [name.replace("<robot>", r) for r in ("panda", "iiwa14", "ur5")] if "<robot>" in name else [name]
    return any(glob.glob(str(ROOT / re.sub(r"<[^>]+>", "*", c))) for c in candidates)


def test_every_named_repository_file_exists():
    missing = {}
    for pattern in SOURCES:
        for path in ROOT.glob(pattern):
            if ".venv" in path.parts or "build" in path.parts:
                continue
            for match in PATH.finditer(path.read_text(errors="replace")):
                name = match.group(1)
                if "msg/*" not in name and not _exists(name):
                    missing.setdefault(str(path.relative_to(ROOT)), []).append(name)
    assert not missing, f"named files that do not exist: {missing}"
