"""The `predbench report` and `predbench status` commands.

    predbench report RUN_DIR [RUN_DIR ...] [--out DIR]
    predbench status RUN_DIR [--json]

`report` exits 0 when it published, 1 when the merge gate refused (each offence on its own
line), 2 on a usage error or input it cannot read (a file of the run truncated, not JSON, not
its model: one line naming it). `status` exits 0, or 2 when the run cannot be read or its plan,
ledger and records disagree in a way no harness process leaves them (edited or damaged by hand).
Every error is one line; no traceback reaches the user.

cli.py calls `add_commands(subparsers)`; each command sets `handler`, called as
`args.handler(args)` and returning the exit code. Standalone: `python -m pytest_predbench.report_cli`.
"""

import argparse
import sys
from pathlib import Path

from pytest_predbench.atomic import CorruptStateError
from pytest_predbench.environment import PredEnvironmentError
from pytest_predbench.merge_gate import GateRefusal, ReportInputError

PUBLISHED, REFUSED, UNUSABLE = 0, 1, 2


def _error(message: str) -> int:
    print(f"predbench: error: {message}", file=sys.stderr)
    return UNUSABLE


def run_report(args: argparse.Namespace) -> int:
    from pytest_predbench import leaderboard

    paths = [Path(p).resolve() for p in args.run_dirs]
    if len(set(paths)) != len(paths):
        return _error("a run directory is given more than once")
    if args.out is None and len(paths) > 1:
        return _error("merging several runs: give --out DIR for the merged leaderboard")
    out = Path(args.out) if args.out else paths[0]
    try:
        board = leaderboard.build(paths)
    except (ReportInputError, PredEnvironmentError) as exc:
        return _error(str(exc))
    except GateRefusal as refusal:
        where = ", ".join(sorted({o.run for o in refusal.offences}))
        print(
            f"predbench report refused ({where}): {len(refusal.offences)} offence(s); nothing was published",
            file=sys.stderr,
        )
        for line in refusal.lines():
            print(line, file=sys.stderr)
        return REFUSED
    try:
        written = leaderboard.write_leaderboard(out, board)
    except OSError as exc:
        return _error(f"cannot write to {out}: {exc.strerror}")
    if board.fake:
        print("FAKE runner: these figures measure no model")
    for row in board.models:
        rules = f" ({', '.join(row.rules)})" if row.rules else ""
        alarms = f"{row.false_alarms} false alarm(s)"
        print(f"{row.rank:>3}. {row.model}: {row.verified_bugs} verified bug(s){rules}, {alarms}")
    for path in written.values():
        print(f"wrote {path}")
    return PUBLISHED


def run_status(args: argparse.Namespace) -> int:
    from pytest_predbench.status import StatusError, read_status, status_lines

    try:
        status = read_status(Path(args.run_dir))
    except (StatusError, CorruptStateError) as exc:
        return _error(str(exc))
    if args.json:
        print(status.model_dump_json(indent=2))
    else:
        print("\n".join(status_lines(status)))
    return 0


def add_commands(subparsers: "argparse._SubParsersAction") -> None:
    report = subparsers.add_parser(
        "report",
        help="publish the leaderboard of finished runs (refuses unless every item is accounted for)",
        description="Gate, re-verify and publish leaderboard.json, .md and .html. "
        "Exit 0 published, 1 refused by the merge gate, 2 usage or unreadable input.",
    )
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory (several merge)")
    report.add_argument("--out", metavar="DIR", help="where to write (default: the run directory; required to merge)")
    report.set_defaults(handler=run_report)
    status = subparsers.add_parser("status", help="progress of a run, live or finished")
    status.add_argument("run_dir", metavar="RUN_DIR")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=run_status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="predbench")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
