"""Subcommands of the `idyn` CLI (see idyn_ros/cli.py for the contract), and the argparse number types and output
check they share."""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path


def positive(kind: type) -> object:
    """argparse type: a finite number > 0 of ``kind`` (int or float), else a one-line error."""
    return _number(kind, lambda value: value > 0, "> 0")


def non_negative(kind: type, maximum: float = math.inf) -> object:
    """argparse type: a finite number of ``kind`` in 0..``maximum``, else a one-line error (not a numpy traceback)."""
    return _number(kind, lambda value: 0 <= value <= maximum, ">= 0" if maximum == math.inf else f"in 0..{maximum}")


def _number(kind: type, accept: Callable[[float], bool], what: str) -> Callable[[str], float | int]:
    """argparse type: ``kind(text)`` when finite and ``accept``-ed, else an error saying ``what`` it must be."""
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            raise argparse.ArgumentTypeError(f"expected {article} {kind.__name__} {what}, got {text!r}") from None
        if not (math.isfinite(value) and accept(value)):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    parse.__name__ = f"{kind.__name__} {what}"
    return parse


def writable_output(text: str, option: str, inputs: Sequence[str | Path] = (), folder: bool = False) -> Path:
    """``text`` as a file to write (``folder``: a folder to write files in), checked before the work: not a folder
    (``folder``: not a file), none of ``inputs``, in a writable place."""
    import tempfile

    from idyn_ros.errors import ParameterError

    path = Path(text)
    if folder and path.exists() and not path.is_dir():
        raise ParameterError(f"{option} {text} is a file; give a folder (it is created when missing)")
    if not folder and path.is_dir():
        raise ParameterError(f"{option} {text} is a folder; give a file name in it")
    for given in inputs:
        if path.resolve() == Path(given).resolve():
            raise ParameterError(f"{option} {text} is also an input; writing it would destroy that input, "
                                 f"choose another {option}")
    place = path.absolute() if folder else path.absolute().parent
    while not place.exists():  # the write creates missing folders: check the place it would create them in
        place = place.parent
    if not place.is_dir():
        raise ParameterError(f"{option} {text}: {place} is a file, not a folder; choose another {option}")
    try:  # the write goes through a temp file in that folder (data.atomic): try exactly that
        with tempfile.TemporaryFile(dir=place):
            pass
    except OSError as exc:
        raise ParameterError(f"{option} {text}: cannot write in {place} ({exc.strerror or exc}); "
                             f"choose another {option}") from None
    return path


@contextlib.contextmanager
def output_folder(text: str, option: str) -> Iterator[Path]:
    """``writable_output(text, option, folder=True)`` for the block; if the block fails (an error, a refusal, Ctrl-C),
    the folders the run created for it are removed again when it left them empty.

    Why: a train that failed after minutes left an empty run folder behind that looked like a run. Only empty folders
    go (a checkpoint.pt, model.pt or model.onnx written before the failure keeps its folder, for --resume or
    `idyn export`), and only those that did not exist before: a folder the user had is never touched.
    """
    path = writable_output(text, option, folder=True)
    with _created_folders_removed_on_failure(path):
        yield path


@contextlib.contextmanager
def output_file(text: str, option: str, inputs: Sequence[str | Path] = ()) -> Iterator[Path]:
    """``writable_output(text, option, inputs)`` for the block, with ``output_folder``'s cleanup of the folders the
    run creates to hold the file (the write creates missing ones, data.atomic).

    Why: the same promise as ``output_folder`` for the commands that write one file (identify, export, payload): a
    run that fails, is refused or is interrupted leaves no empty folder behind. The file itself needs no cleanup: it
    is written atomically, so a failed write leaves the user's earlier file as it was (or none), never a part.
    """
    path = writable_output(text, option, inputs)
    with _created_folders_removed_on_failure(path.absolute().parent):
        yield path


@contextlib.contextmanager
def _created_folders_removed_on_failure(folder: Path) -> Iterator[None]:
    """Remove ``folder`` and the folders above it that do not exist now if the block fails and leaves them empty."""
    created = [p for p in (folder.absolute(), *folder.absolute().parents) if not p.exists()]  # deepest first
    try:
        yield
    except BaseException:
        for made in created:
            try:
                made.rmdir()  # only an empty folder: never a file of this run or of anyone else
            except FileNotFoundError:  # failed before it was made
                continue
            except OSError:  # not empty (or not ours to remove): it and the folders above it stay
                break
        raise
