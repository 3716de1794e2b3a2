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


def _subcommands(parser) -> dict:
    import argparse

    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def test_every_idyn_command_a_message_suggests_exists():
    """Error texts suggested `idyn dataset --joint-map old=new` (an option of `idyn dataset import`) and
    `idyn dataset --drop-nonfinite` (no such option): each backtick-quoted `idyn ...` in the package must name a
    command, action and options that its --help lists."""
    from idyn_ros.cli import build_parser

    commands = _subcommands(build_parser())
    wrong = []
    quoted = re.compile(r"`idyn ([a-z][^`]{0,300}?)`", re.S)
    for path in (ROOT / "idyn_ros").rglob("*.py"):
        for match in quoted.finditer(path.read_text()):
            text = re.sub(r"\"\s*\n\s*f?\"", "", match.group(1))  # a suggestion split over string literals
            words = text.split()
            parser = commands.get(words[0])
            if parser is None:
                wrong.append(f"{path.name}: `idyn {text}`: no command {words[0]}")
                continue
            actions = _subcommands(parser)
            if actions and len(words) > 1 and not words[1].startswith("-") and words[1] in actions:
                parser = actions[words[1]]
            elif actions and any(w.startswith("--") for w in words):
                wrong.append(f"{path.name}: `idyn {text}`: options without an action of {list(actions)}")
                continue
            options = {s for a in parser._actions for s in a.option_strings}
            for word in words[1:]:
                flag = word.split("=")[0].strip("\"'(),")
                if flag.startswith("--") and flag not in options:
                    wrong.append(f"{path.name}: `idyn {text}`: no option {flag}")
    assert not wrong, "\n".join(wrong)


def test_interfaces_doc_lists_every_option_load_dataset_passes_on():
    """`time_unit` and `torque_constants` were missing from the options docs/interfaces.md gives `load_dataset`."""
    import inspect

    from idyn_ros.data.importers import import_source

    text = (ROOT / "docs" / "interfaces.md").read_text()
    start = text.index("- `load_dataset(")
    entry = text[start:text.index("\n- ", start)]
    options = list(inspect.signature(import_source).parameters)[3:]  # after path, robot, joint_map
    assert [o for o in options if f"`{o}`" not in entry] == []
