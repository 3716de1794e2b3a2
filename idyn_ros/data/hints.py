"""Error hints that name only options the running command has.

The data layer is reached from several commands (``idyn dataset import/info``, ``idyn train``,
``idyn evaluate``) and from Python; only ``idyn dataset`` has ``--joint-map``, ``--recover``,
``--topic``... A command declares its options with :func:`command_options`; a hint names an option
only when the running command has it, and otherwise points to ``idyn dataset import`` as the step
to run first (plus the keyword argument for Python callers).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["command_options", "option_hint", "prefix_hint", "prefix_pair", "recover_hint", "rename_hint"]

_OPTIONS: ContextVar[frozenset[str]] = ContextVar("idyn_command_options", default=frozenset())


@contextmanager
def command_options(options: Iterable[str]) -> Iterator[None]:
    """While inside, hints may name ``options`` (the option strings of the running command)."""
    token = _OPTIONS.set(frozenset(options))
    try:
        yield
    finally:
        _OPTIONS.reset(token)


def option_hint(option: str, value: str = "", purpose: str = "", keyword: str = "") -> str:
    """``pass --opt VALUE to PURPOSE`` when the running command has ``--opt``; else the import step to run first."""
    flag = f"{option} {value}".rstrip()
    why = f" to {purpose}" if purpose else ""
    if option in _OPTIONS.get():
        return f"pass {flag}{why}"
    text = f"run `idyn dataset import SRC {flag} -o OUT.npz`{why} first, then use OUT.npz"
    return text + (f" (Python: {keyword})" if keyword else "")


def recover_hint(purpose: str) -> str:
    """The hint for a damaged or unfinished bag."""
    return option_hint("--recover", purpose=purpose, keyword="recover=True")


def prefix_pair(a: str, b: str) -> tuple[str, str] | None:
    """(old, new) prefixes that turn ``a`` into ``b`` when they share a suffix after a ``_`` or ``/``, else None."""
    i = 0
    while i < min(len(a), len(b)) and a[-1 - i] == b[-1 - i]:
        i += 1
    while i and (i >= len(a) or a[-1 - i] not in "_/"):  # a prefix map ends in _ or /: fer_, not fer
        i -= 1
    if i and a[: len(a) - i]:  # the new prefix may be empty: ur5_=  drops a tf prefix
        return a[: len(a) - i], b[: len(b) - i]
    return None


def prefix_hint(have: list[str], want: list[str]) -> str:
    """The ``old=new`` prefix map that brings most wanted joints in (e.g. ``arm_=panda_``), else one exact rename."""
    def renamed(name: str, old: str, new: str) -> str:
        return new + name[len(old):] if name.startswith(old) else name

    pairs = sorted({pair for a in have for b in want if (pair := prefix_pair(a, b)) is not None and pair[0] != pair[1]})
    best = max(pairs, key=lambda pr: sum(renamed(a, *pr) in want for a in have), default=None)
    if best is not None:
        return f"{best[0]}={best[1]}"
    return f"{have[0]}={want[0]}" if have and want else "old=new"


def rename_hint(have: list[str], want: list[str]) -> str:
    """How the robot's joints ``want`` missing from the recorded ``have`` could come in: a ``--joint-map`` from the
    recorded names the robot lacks, or, when fewer of those are left than joints are missing, that no renaming can
    (a joint not recorded, or an arm with fewer joints): a map proposed there only leads to the next error."""
    spare = [h for h in have if h not in want]
    missing = [w for w in want if w not in have]
    if len(spare) < len(missing):
        return (f"no renaming can supply them: of its {len(have)} joints, {len(spare)} are not the robot's, for "
                f"{len(missing)} missing; a recording of another arm (pick the robot it was recorded on), or one "
                f"that lacks joints (record every joint of the robot)")
    return "rename old=new or by prefix: " + option_hint("--joint-map", prefix_hint(spare, missing),
                                                         keyword="joint_map='old=new'")
