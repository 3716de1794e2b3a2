"""Studies stay outside the package, and docs/benchmarks.md is the generator's output for the committed results."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

from idyn_ros.bench.report import RENDERERS, render, write_report
from idyn_ros.errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]


def test_benchmarks_doc_matches_committed_results() -> None:
    """Regenerate with `python -m idyn_ros.bench.report` after changing bench/results/ or a study README."""
    expected = render(ROOT / "bench" / "results", ROOT / "studies", ROOT / "docs")
    assert (ROOT / "docs" / "benchmarks.md").read_text() == expected, (
        "docs/benchmarks.md is out of date: run python -m idyn_ros.bench.report")


def test_every_committed_result_has_its_own_renderer() -> None:
    """The generic fallback (numeric leaves) is for new files, not for what the document shows a reader."""
    from fnmatch import fnmatch

    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert any(fnmatch(path.name, pattern) for pattern, *_ in RENDERERS), (
            f"bench/results/{path.name} has no renderer in idyn_ros/bench/report.py")


def test_report_renders_unknown_files_and_names_a_broken_one(tmp_path: Path) -> None:
    prov = {"command": "idyn bench --only x", "git_revision": "abc1234", "date_utc": "2026-01-01T00:00:00Z",
            "machine": {"cpus": 2, "python": "3.11"}}
    (tmp_path / "new_topic.json").write_text(json.dumps({"speed": {"p50_us": 12.5}, "_provenance": prov}))
    text = render(tmp_path, tmp_path / "no_studies", tmp_path)
    assert "## other" in text and "| speed.p50_us | 12.5 |" in text and "`abc1234`" in text
    assert "## Studies" not in text
    (tmp_path / "sim.json").write_text(json.dumps({"physics_step_panda_true": {"p50_us": 1.0}}))
    with pytest.raises(ParameterError, match=r"sim\.json"):
        render(tmp_path, tmp_path, tmp_path)


def test_report_check_mode_flags_a_stale_document(tmp_path: Path) -> None:
    results, doc = ROOT / "bench" / "results", tmp_path / "benchmarks.md"
    assert write_report(results, ROOT / "studies", doc, check=True) == 1  # missing
    assert write_report(results, ROOT / "studies", doc) == 0
    assert write_report(results, ROOT / "studies", doc, check=True) == 0
    doc.write_text(doc.read_text().replace("| panda |", "| pandas |", 1))
    assert write_report(results, ROOT / "studies", doc, check=True) == 1


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in
              ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(str(node.args[0].value))
    return names


def test_package_never_imports_studies() -> None:
    offenders = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "idyn_ros").rglob("*.py"))
                 if any(m == "studies" or m.startswith("studies.") for m in _imported_modules(path))]
    assert not offenders, f"idyn_ros must not import studies/: {offenders}"
    assert not (ROOT / "studies" / "__init__.py").exists(), "studies/ is a folder of scripts, not a package"


def test_studies_import_idyn_ros_as_a_library() -> None:
    """Each study: README (question, command, conclusion), a run.py on the package, committed results."""
    studies = sorted(p for p in (ROOT / "studies").iterdir() if p.is_dir())
    assert {p.name for p in studies} >= {"gp_lip", "plant_integrator"}
    for study in studies:
        readme = (study / "README.md").read_text()
        assert f"python studies/{study.name}/run.py" in readme and "Conclusion" in readme, study.name
        assert any(m.startswith("idyn_ros") for m in _imported_modules(study / "run.py")), study.name
        assert sorted((study / "results").glob("*.json")), f"{study.name} has no results"


def _package_names_used(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from idyn_ros... import name`` in a script, function-local ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("idyn_ros"):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def test_every_name_a_study_imports_from_the_package_still_exists() -> None:
    """A study imports most of its package names inside its sections, so a renamed function breaks it only when that
    section runs again, perhaps months later; this finds it when the package changes."""
    import importlib

    missing = []
    for path in sorted((ROOT / "studies").rglob("*.py")):
        for line, module, name in _package_names_used(path):
            try:
                found = hasattr(importlib.import_module(module), name)
                if not found:  # a submodule: from idyn_ros.models import gp
                    importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{path.relative_to(ROOT)}:{line}: from {module} import {name}")
    assert not missing, missing


def test_setup_py_and_cmake_do_not_install_studies() -> None:
    import setuptools

    tree = ast.parse((ROOT / "setup.py").read_text())
    setup_call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    packages_expr = next(k.value for k in setup_call.keywords if k.arg == "packages")
    find = functools.partial(setuptools.find_packages, where=str(ROOT))
    packages = eval(compile(ast.Expression(packages_expr), "setup.py", "eval"), {"find_packages": find})
    assert "idyn_ros.bench" in packages
    assert not [p for p in packages if p.split(".")[0] == "studies"], packages
    # the share files: run setup.py's _data_files() without running setup()
    defs = ast.Module([n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef)], [])
    namespace: dict = {"__file__": str(ROOT / "setup.py")}
    exec(compile(defs, "setup.py", "exec"), namespace)
    installed = [src for _, sources in namespace["_data_files"]() for src in sources]
    assert installed and not [src for src in installed if src.startswith("studies")]
    assert "studies" not in (ROOT / "CMakeLists.txt").read_text()


def test_provenance_counts_code_edits_as_dirty_but_not_result_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bench topic rewrites bench/results/*.json; the topics after it in the same run ran clean code."""
    import subprocess

    from idyn_ros import bench

    status = {"out": ""}

    def fake_run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        out = "abc1234\n" if args[:2] == ["git", "rev-parse"] else status["out"]
        return subprocess.CompletedProcess(args, 0, stdout=out, stderr="")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    status["out"] = " M bench/results/sim.json\n M docs/benchmarks.md\n M studies/gp_lip/results/kernels.json\n"
    assert bench.run_provenance("x")["git_revision"] == "abc1234"
    status["out"] += " M idyn_ros/control/law.py\n"
    assert bench.run_provenance("x")["git_revision"] == "abc1234-dirty"
    status["out"] = " M studies/gp_lip/run.py\n"
    assert bench.run_provenance("x")["git_revision"] == "abc1234-dirty"
