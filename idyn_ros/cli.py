"""The ``idyn`` command: one subcommand per step of a model's life.

    record -> dataset -> identify / train -> evaluate -> export -> bringup (1 kHz nodes)

Each subcommand lives in ``idyn_ros/commands/<name>.py`` and defines ``HELP`` (one line),
``configure(parser)`` and ``run(args) -> int``. Command modules import only argparse-level things
at import time, so ``idyn --help`` stays fast; heavy imports (torch, mujoco) happen inside ``run``.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import re
import sys

from idyn_ros.errors import IdynError

# Order = the order a user meets them in.
COMMANDS: tuple[str, ...] = (
    "record",
    "dataset",
    "excite",
    "identify",
    "payload",
    "train",
    "evaluate",
    "wrench",
    "export",
    "bringup",
    "demo",
    "bench",
    "robots",
)


def _available_commands() -> dict[str, object]:
    modules = {}
    for name in COMMANDS:
        try:
            modules[name] = importlib.import_module(f"idyn_ros.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"idyn_ros.commands.{name}":
                raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="idyn",
        description=__doc__.split("\n\n")[0],
        epilog="Run `idyn COMMAND --help` for the options of one command.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in _available_commands().items():
        sub = subparsers.add_parser(
            name,
            help=module.HELP,
            description=(module.__doc__ or module.HELP).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.set_defaults(_run=module.run)
    return parser


# A comma-separated list that starts like a negative number ("-10,2.5,-1e-3"): never an option name
_NEGATIVE_NUMBER_LIST = re.compile(r"-\.?\d[^,]*(,[^,]*)+")


def attach_negative_lists(argv: list[str]) -> list[str]:
    """``--option -10,2,...`` as ``--option=-10,2,...``.

    Why: argparse reads a value that starts with '-' and is not one plain number as the next option and stops with
    "expected one argument" (``--torque-constants -10,2,...`` of `idyn train` and `idyn dataset import`); attached with
    '=' it is the option's value, so the option's own check answers (each gain > 0). Only long options and number
    lists: a single negative number already works, and nothing after ``--`` is touched.
    """
    out: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            return out + argv[i:]
        if out and out[-1].startswith("--") and "=" not in out[-1] and _NEGATIVE_NUMBER_LIST.fullmatch(token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


# the machine's, not the command's: a full disk, a quota, a folder the user cannot write
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})


def _innermost_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)subcommand parser ``args`` came through: its usage is the one a wrong option needs."""
    while True:
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = None if action is None else action.choices.get(getattr(args, action.dest, None))
        if chosen is None:
            return parser
        parser = chosen


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(attach_negative_lists(sys.argv[1:] if argv is None else list(argv)))
    if unknown:  # argparse says it with the top-level usage ("usage: idyn [-h] COMMAND ..."): say it as the command
        _innermost_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    from idyn_ros.data.hints import command_options

    command = _innermost_parser(parser, args)  # error hints name its options ("pass --recover"), else the import step
    try:
        with command_options(s for action in command._actions for s in action.option_strings):
            return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `idyn dataset info ... | head` closed our stdout: end quietly, as a SIGPIPE would
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's final flush must not fail
        return 141
    except IdynError as exc:  # expected, user-fixable problems: one clear line, no traceback
        print(f"{_innermost_parser(parser, args).prog}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in DISK_ERRORS:  # anything else is ours to see with its traceback
            raise
        print(f"{_innermost_parser(parser, args).prog}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
