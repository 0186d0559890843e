"""The `predbench` command: one argparse parser, one subcommand per job, one set of exit codes.

    predbench verify [--json] [-j N] PATH ...        0 all accepted, 1 any rejected, 4 any inconclusive,
                                                    3 the verifier failed on any (files, dirs, runs)
    predbench calibrate [--json] [CASE.json ...]    0 all as expected, 1 any differs
    (verify and calibrate take --bug-pool POOL: the minted build of a pool from `predbench mint`)
    predbench report [RUN_DIR ...] [--out DIR]      0 published, 1 refused by the publication gate
    predbench report A B ... --compare [--out DIR]  the same, each run on its own, side by side
    predbench status [RUN_DIR] [--json]             0 (progress of a live or finished run)
    predbench runs [DIR] [--html]                   0 (the local runs: id, models, state, spend; --html: DIR/index.html)
    predbench mint --seed S --bugs N --out POOL     0 N bugs minted, 1 fewer (a hidden bug pool)
    predbench plan --models A,B --sessions N --budget X   0 (what the plan costs at most and typically;
                                                    no key, no call)
    predbench --version                             predbench's version and the pinned pred's
    predbench status --store URL ID [--json]        the same for a run kept in PostgreSQL
    predbench export --store URL ID DIR             0 written (a run directory `report` reads)

Every command exits 2 on a usage error or input it cannot use (a missing file, no environment
record, a pred that differs from its record, a run directory with a damaged file): one line on
stderr, never a traceback. A bad certificate is a rejected verdict (exit 1), not an error. A bug of
predbench itself is one line too, exit 3 — the verifier failing on a certificate (an `error`
verdict) included. A certificate the verifier could not decide within its limits is inconclusive,
exit 4 (unless another says 1 or 3).

`report` and `status` without a run take the last run this checkout started (pytest's cache, as
`--resume-bench` does), else the newest run under ./reports.

To add a subcommand, append one line to COMMANDS: a function that takes the subparsers, adds its
parser and sets `handler` (called as `args.handler(args)`, returning the exit code). Heavy imports
stay inside the handlers, so building the parser costs nothing and `predbench verify` stays quick.
"""

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_predbench.files import CorruptStateError
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError
from pytest_predbench.verify.pred import LimitError
from pytest_predbench.verify.verdict import Outcome, Verdict

if TYPE_CHECKING:
    from pytest_predbench.verify.pool import Pool

OK, FAILED, USAGE, INTERNAL, INCONCLUSIVE = 0, 1, 2, 3, 4
"""Exit codes: done; a verdict, calibration or gate said no; the input cannot be used; a bug of
predbench's own (one line naming it, never a traceback); a verification the verifier's limits cut
short (`predbench verify`)."""
INTERRUPTED = 130


@contextlib.contextmanager
def stdout_on_stderr(active: bool = True) -> Iterator[None]:
    """While active, whatever would go to stdout goes to stderr — Python's prints and any child
    process's (file descriptor 1 itself is pointed at 2): with --json, stdout is the JSON and nothing
    else, whatever setting a version up prints meanwhile (setup's progress, a build's output)."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def usage_error(message: str) -> int:
    print(f"predbench: error: {message}", file=sys.stderr)
    return USAGE


def load_environment(args: argparse.Namespace, minted: "Pool | None" = None) -> EnvRecord:
    """The record of the version asked for (set up first if this machine never built it), checked
    against its pred; raises PredEnvironmentError, CorruptStateError or UnsupportedVersion."""
    from pytest_predbench.verify import pin
    from pytest_predbench.verify.verifier import checked_environment

    try:
        version = pin.check_version(args.pred_version or pin.default_choice())
    except pin.UnsupportedVersion as exc:
        raise PredEnvironmentError(f"--pred-version: {exc}") from None
    if args.bug_pool is not None:
        return pool_environment(args, minted or chosen_pool(args))
    if args.env_record:
        return checked_environment(version, str(args.env_record))
    return version_record(version)


def chosen_pool(args: argparse.Namespace) -> "Pool | None":
    """--bug-pool's pool, checked, on the version asked for; PredEnvironmentError for a pool that is
    missing or damaged, or on another version than asked."""
    from pytest_predbench.verify import pool

    if args.bug_pool is None:
        return None
    try:
        return pool.load_for_version(args.bug_pool, args.pred_version)
    except pool.PoolError as exc:
        raise PredEnvironmentError(f"--bug-pool: {exc}") from None


def pool_environment(args: argparse.Namespace, minted: "Pool") -> EnvRecord:
    """--bug-pool: the pool's minted build, on the pool's own version."""
    from pytest_predbench.verify.environment import ground_record

    if args.env_record:
        raise PredEnvironmentError("--bug-pool and --env-record both name the build to verify on: give one")
    return ground_record(minted.version, str(minted.root))


def add_checking_command(
    subparsers: "argparse._SubParsersAction", name: str, handler: Callable, **texts: str
) -> argparse.ArgumentParser:
    """A subcommand with the options every verifying command shares: --json and --env-record."""
    parser = subparsers.add_parser(name, **texts)
    parser.add_argument("--json", action="store_true", help="print the result as JSON (several: an array)")
    add_version_option(parser)
    parser.add_argument(
        "--env-record",
        metavar="PATH",
        type=Path,
        help="environment record to verify against (default: the one `make setup` wrote)",
    )
    parser.add_argument(
        "--bug-pool",
        metavar="POOL",
        type=Path,
        help="verify against the minted build of this bug pool (`predbench mint`) instead of the version's own",
    )
    parser.set_defaults(handler=handler)
    return parser


def add_version_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pred-version",
        metavar="V",
        help="the pred version to work on (default 0.6.0, the reference pin); built the first time it is asked for",
    )


def verdict_line(verdict: Verdict) -> str:
    status = verdict.outcome.value.upper()
    same = f" (the same certificate as {verdict.same_as})" if verdict.same_as else ""
    judged = f" [{verdict.judged_by()}]" if verdict.pred_version else ""
    return f"{status} {verdict.certificate or '<certificate>'}: {verdict.reason}{same}{judged}"


def version_conflict(args: argparse.Namespace, found: list, version: str) -> str | None:
    """The version that judges is explicit: with --pred-version (or --env-record) given, a certificate
    whose own `pred_version` names another version is refused, in one line, before anything is
    verified — never quietly judged on the certificate's version instead, nor on the option's as if
    it had named none. Without either option, a certificate's `pred_version` chooses its version."""
    if args.pred_version is None and args.env_record is None:
        return None
    given = "--pred-version" if args.pred_version else "--env-record"
    for entry in found:
        wanted = entry.certificate.pred_version if entry.certificate is not None else None
        if wanted is not None and wanted != version:
            return (
                f"{entry.origin} is for pred {wanted}, but {given} asks for pred {version}: drop {given} to "
                f"verify it on {wanted}, or the certificate's pred_version to verify it on {version}"
            )
    return None


def print_json(models: list) -> None:
    """One model prints as an object, several as an array."""
    if len(models) == 1:
        print(models[0].model_dump_json(indent=2))
    else:
        print("[\n" + ",\n".join(m.model_dump_json(indent=2) for m in models) + "\n]")


def run_verify(args: argparse.Namespace) -> int:
    from pytest_predbench.report.certificates import find_certificates
    from pytest_predbench.verify.batch import certificate_key, verify_found

    missing = [path for path in args.certificates if not path.exists()]
    if missing:
        return usage_error(f"no such file: {missing[0]}")
    if args.jobs is not None and args.jobs < 1:
        return usage_error(f"-j must be at least 1, got {args.jobs}")
    found = find_certificates(args.certificates)  # read before any setup: a bad input is told at once
    if not found:
        return usage_error(f"no certificate in {', '.join(map(str, args.certificates))}")
    if args.pred_version is not None and args.bug_pool is None:  # refused before any version is set up
        conflict = version_conflict(args, found, args.pred_version)
        if conflict:
            return usage_error(conflict)
    malformed = [f for f in found if f.certificate is None]
    if malformed and not args.json and len(malformed) < len(found):
        first = malformed[0]
        print(f"{len(malformed)} of {len(found)} malformed, rejected without pred (first: {first.origin}: "
              f"{first.problem})", file=sys.stderr)  # fmt: skip
    try:
        # only a readable certificate needs pred: a command given nothing to run it on never sets it up
        with stdout_on_stderr(args.json):
            record = load_environment(args) if len(malformed) < len(found) else None
    except (PredEnvironmentError, CorruptStateError) as exc:
        return usage_error(str(exc))
    conflict = version_conflict(args, found, record.pred_version) if record is not None else None
    if conflict:
        return usage_error(conflict)
    try:
        with stdout_on_stderr(args.json):  # a certificate's own version may be set up meanwhile
            verdicts = verify_found(found, record, args.jobs, records=version_record)
    except PredEnvironmentError as exc:
        return usage_error(str(exc))
    if args.json:
        print_json(verdicts)
    else:
        for verdict in verdicts:
            print(verdict_line(verdict))
        readable = [f.certificate for f in found if f.certificate is not None]
        distinct = len({certificate_key(c) for c in readable})
        malformed = len(verdicts) - len(readable)
        counts = ", ".join(f"{sum(v.outcome is o for v in verdicts)} {o.value}" for o in Outcome)
        print(f"{len(verdicts)} certificate(s) ({malformed} malformed, {distinct} distinct verified): {counts}")
    return verify_exit(verdicts)


VERIFY_EXITS = (
    (Outcome.ERROR, INTERNAL, "the verifier failed on any (a bug of predbench's own)"),
    (Outcome.REJECTED, FAILED, "any is rejected"),
    (Outcome.INCONCLUSIVE, INCONCLUSIVE, "any is inconclusive (the verifier's limits cut it short)"),
)
"""`predbench verify`'s exits, first that applies: the verifier failing is predbench's bug (3) before
any verdict; a rejection (1) before a verification the verifier could not finish (4). Its --help
is written from this table."""


def verify_exit(verdicts: list[Verdict]) -> int:
    outcomes = {v.outcome for v in verdicts}
    for outcome, code, _ in VERIFY_EXITS:
        if outcome in outcomes:
            return code
    return OK


def verify_exits_text() -> str:
    cases = "; ".join(f"{code} when {when}" for _, code, when in VERIFY_EXITS)
    return f"Exit {OK} when every certificate is accepted; else the first of: {cases}; {USAGE} on a usage error."


def version_record(version: str) -> EnvRecord:
    """The checked record of a version: the one asked for, or the one a certificate names (set up
    first if this machine never built it)."""
    from pytest_predbench.verify.setup import ensured_record
    from pytest_predbench.verify.verifier import checked_environment

    ensured_record(version)
    return checked_environment(version)


def run_calibrate(args: argparse.Namespace) -> int:
    from pytest_predbench.verify.calibration import (
        calibration_dir,
        discover,
        minted_bugs_of,
        orphans,
        run_case,
        run_pool_certificate,
    )

    missing = [path for path in args.cases if not path.exists()]
    if missing:
        return usage_error(f"no such file: {missing[0]}")
    try:
        with stdout_on_stderr(args.json):
            minted = chosen_pool(args)  # loaded (every file hashed) once, for the record and the skips
            record = load_environment(args, minted)  # the version (or the pool's), whose set is calibrated
    except (PredEnvironmentError, CorruptStateError) as exc:
        return usage_error(str(exc))
    cases = calibration_dir(record.pred_version)
    paths = args.cases or discover(cases)
    if not paths:
        return usage_error(f"no calibration cases found for pred {record.pred_version}")
    if not args.json:
        on = f": the minted build of {minted.label()}" if minted else ""
        print(f"calibration set of pred {record.pred_version} ({record.pred_path}{on})")
    problems = [] if args.cases else [f"FAIL {p}: its certificate is missing" for p in orphans(cases)]
    skipped = []
    outcomes = []
    for path in paths:
        bugs = minted_bugs_of(path, minted.manifest) if minted else []
        if bugs:
            skipped.append(
                f"skip {path.stem}: its rule is minted in the pool ({', '.join(bugs)}), where the verdict it "
                "expects on the version's own build need not hold"
            )
            continue
        try:
            outcomes.append(run_case(path, record))
        except CorruptStateError as exc:
            problems.append(f"FAIL {path.stem}: {exc}")
    for bug in minted.manifest.bugs if minted and not args.cases else []:  # each must be accepted here
        try:
            outcomes.append(run_pool_certificate(minted, bug, record))
        except CorruptStateError as exc:
            problems.append(f"FAIL {exc}")
    failed = len(problems) + sum(not o.ok for o in outcomes)
    total = len(outcomes) + len(problems)
    left_out = f"; {len(skipped)} skipped, on rules the pool mutated" if skipped else ""
    if args.json:
        print_json(outcomes)
        for line in skipped + problems:
            print(line, file=sys.stderr)
    else:
        for line in [o.line() for o in outcomes] + skipped + problems:
            print(line)
        print(f"{total - failed} of {total} calibration cases as expected{left_out}")
    return OK if not failed else FAILED


def add_verify_commands(subparsers: "argparse._SubParsersAction") -> None:
    verify = add_checking_command(
        subparsers,
        "verify",
        run_verify,
        help="verify counterexample certificates with the pinned library alone",
        description="Re-check every certificate found in the paths given: certificate files, directories of them, "
        "item records, whole run directories. Identical certificates are verified once; the rest in parallel. "
        + verify_exits_text(),
    )
    verify.add_argument("certificates", nargs="+", type=Path, metavar="PATH", help="certificate, directory or run")
    verify.add_argument(
        "-j", "--jobs", type=int, metavar="N", help="certificates verified at once (default: one per core)"
    )
    calibrate = add_checking_command(
        subparsers,
        "calibrate",
        run_calibrate,
        help="run the calibration certificates and compare each verdict with the expected one",
        description="Verify every fixtures/calibration/<V>/*.json of the version (or the given ones) against the "
        "real pred of that version. "
        "Exit 0 when every verdict is as expected, 1 when any differs, 2 on a usage error.",
    )
    calibrate.add_argument("cases", nargs="*", type=Path, metavar="CASE.json")


def _refused(refusal, out: Path) -> int:
    from pytest_predbench.report.leaderboard import mark_stale

    where = ", ".join(sorted({o.run for o in refusal.offences}))
    print(
        f"predbench report refused ({where}): {len(refusal.offences)} offence(s); nothing was published",
        file=sys.stderr,
    )
    for line in refusal.lines():
        print(line, file=sys.stderr)
    try:
        stale = mark_stale(out, f"{len(refusal.offences)} offence(s)")
    except OSError as exc:
        print(f"could not mark the earlier report in {out} as stale: {exc.strerror}", file=sys.stderr)
        stale = []
    for page in stale:
        print(f"marked stale: {page} (an earlier report's page, not this one's)", file=sys.stderr)
    return FAILED


def _print_board(board) -> None:
    if board.fake:
        print("FAKE runner: these figures measure no model")
    for row in board.models:
        rate = f"{row.sessions_with_bug} of {row.sessions} session(s) with a bug" if row.sessions else "no session ran"
        stops = ", ".join(f"{reason} {n}" for reason, n in sorted(row.stop_reasons.items()) if n) or "none"
        rules = f" ({', '.join(row.rules)})" if row.rules else ""
        pool = ""
        if row.minted is not None:
            bands = ", ".join(f"{band} {n.found} of {n.known}" for band, n in row.minted.bands.items())
            pool = f", minted {row.minted.found} of {row.minted.known} ({bands}), {len(row.real_bugs or [])} real"
        print(
            f"{row.rank:>3}. {row.model}: {row.verified_bugs} verified bug(s){rules}{pool}, {rate}, "
            f"{row.false_alarms} false alarm(s); stops: {stops}"
        )


def last_run() -> Path | None:
    """The run `report` and `status` take when none is named (see the module's docstring)."""
    from pytest_predbench.run.runs import last_run as found

    return found(Path.cwd())


def run_report(args: argparse.Namespace) -> int:
    from pytest_predbench.report import leaderboard
    from pytest_predbench.report.gate import GateRefusal
    from pytest_predbench.report.model import run_labels
    from pytest_predbench.run.runs import comparison_dir
    from pytest_predbench.verify import pin
    from pytest_predbench.verify.pool import PoolError

    if not args.run_dirs:
        last = last_run()
        if last is None:
            return usage_error("no run given and none found here (no remembered run, nothing in ./reports)")
        args.run_dirs = [str(last)]
    paths = [Path(p).resolve() for p in args.run_dirs]
    if len(set(paths)) != len(paths):
        return usage_error("a run directory is given more than once")
    if args.compare and len(paths) < 2:
        return usage_error("--compare needs at least two run directories")
    if args.out is None and len(paths) > 1 and not args.compare:
        return usage_error("merging several runs: give --out DIR for the merged report")
    if args.out is None and args.compare:
        args.out = comparison_dir(paths)
    out = Path(args.out).resolve() if args.out else paths[0]
    try:
        if args.pred_version is not None:
            pin.check_version(args.pred_version)
        if args.compare:
            comparison = leaderboard.compare(paths, out, pred_version=args.pred_version)
        else:
            board = leaderboard.build(paths, out=out, pred_version=args.pred_version)
    except (CorruptStateError, PredEnvironmentError, pin.UnsupportedVersion, PoolError) as exc:
        return usage_error(str(exc))
    except GateRefusal as refusal:
        return _refused(refusal, out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if args.compare:
            written = leaderboard.write_comparison(out, comparison)
        else:
            written = leaderboard.write_leaderboard(out, board)
    except OSError as exc:
        return usage_error(f"cannot write to {out}: {exc.strerror}")
    boards = comparison.boards if args.compare else [board]
    for n, (label, one) in enumerate(zip(run_labels(boards), boards, strict=True), 1):
        if args.compare:
            print(f"run {n} ({label}): {one.runs[0].path}")
        _print_board(one)
    for path in written.values():
        print(f"wrote {path}")
    page = written["html"]
    print(f"open {page.as_uri()}  (each session's steps: {written['pages']}/)")
    if not args.compare:
        print(f"next: predbench status {paths[0]}  |  predbench runs  |  pandas: sessions_df({str(paths[0])!r})")
    return OK


def run_status(args: argparse.Namespace) -> int:
    from pytest_predbench.report.status import read_status, status_lines, status_of
    from pytest_predbench.state.store import StoreError

    if args.run_dir is None:
        if args.store:
            return usage_error("with --store, name the run id")
        last = last_run()
        if last is None:
            return usage_error("no run given and none found here (no remembered run, nothing in ./reports)")
        args.run_dir = str(last)
    try:
        if args.store:
            from pytest_predbench.state.pgstore import PgStore

            store = PgStore(args.store, args.run_dir)
            try:
                status = status_of(store.snapshot(retry=False))
            finally:
                store.close()
        else:
            status = read_status(Path(args.run_dir))
    except (CorruptStateError, StoreError) as exc:
        return usage_error(str(exc))
    if args.json:
        print(status.model_dump_json(indent=2))
    else:
        print("\n".join(status_lines(status)))
    return OK


def add_report_commands(subparsers: "argparse._SubParsersAction") -> None:
    report = subparsers.add_parser(
        "report",
        help="publish the leaderboard of finished runs (refuses unless every item is accounted for)",
        description="Gate, re-verify and publish leaderboard.json, .md, .html and results.csv. "
        "Exit 0 published, 1 refused by the publication gate, 2 usage or unreadable input.",
    )
    report.add_argument(
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run directory (several merge, or with --compare stand apart; default: the last run)",
    )
    report.add_argument(
        "--out",
        metavar="DIR",
        help="where to write (default: the run directory; with --compare reports/compare-<time>; "
        "required to merge several runs)",
    )
    report.add_argument(
        "--compare",
        action="store_true",
        help="set the runs side by side, each scored on its own with its manifest (their plans may differ; "
        "nothing is pooled): comparison.{json,md,html} and results.csv in --out",
    )
    add_version_option(report)
    report.set_defaults(handler=run_report)
    status = subparsers.add_parser(
        "status",
        help="progress of a run, live or finished",
        description="Where a run stands, read without touching it. Exit 0, or 2 when the run cannot be read "
        "or its plan, ledger and records disagree in a way no harness process leaves them.",
    )
    status.add_argument(
        "run_dir", nargs="?", metavar="RUN", help="a run directory, or with --store a run id (default: the last run)"
    )
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument("--store", metavar="URL", help="the PostgreSQL database that keeps run RUN (shared by hosts)")
    status.set_defaults(handler=run_status)
    export = subparsers.add_parser(
        "export",
        help="write a run kept in PostgreSQL out as a run directory (for `predbench report`)",
        description="Read run ID from the store in one consistent read and write it to DIR in the run-directory "
        "format (plan, ledger, item records, trajectories, views), checked as any run directory is. DIR must be "
        "new, empty or an earlier export of the same run. Exit 0 written, 2 on input it cannot use.",
    )
    export.add_argument("--store", metavar="URL", required=True, help="the PostgreSQL database that keeps the run")
    export.add_argument("run_id", metavar="ID")
    export.add_argument("directory", metavar="DIR", type=Path)
    export.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from pytest_predbench.state.audit import read_snapshot, state_faults
    from pytest_predbench.state.pgstore import PgStore
    from pytest_predbench.state.store import StoreError

    try:
        store = PgStore(args.store, args.run_id)
        try:
            run = store.export(args.directory)
        finally:
            store.close()
        snap = read_snapshot(run.path)
    except (CorruptStateError, StoreError) as exc:
        return usage_error(str(exc))
    except OSError as exc:
        return usage_error(f"cannot write to {args.directory}: {exc.strerror}")
    faults = state_faults(snap)
    if faults:
        return usage_error(f"exported to {run.path}, but its books do not add up: {faults[0].line()}")
    finished = sum(record.status.terminal for _, record in snap.records)
    print(
        f"exported {store.where} to {run.path}: {finished} of {len(snap.planned)} planned items have a terminal "
        f"record, {len(snap.ledger.reservations)} reservation(s) open"
    )
    return OK


def run_runs(args: argparse.Namespace) -> int:
    from pytest_predbench.run.runs import list_runs, runs_table, write_index

    where = Path(args.directory)
    if not where.is_dir():
        return usage_error(f"no such directory: {where}")
    lines = list_runs(where)
    print(runs_table(lines))
    if args.html:
        try:
            page = write_index(where, lines)
        except OSError as exc:
            return usage_error(f"cannot write to {where}: {exc.strerror}")
        print(f"open {page.resolve().as_uri()}")
    return OK


def add_runs_command(subparsers: "argparse._SubParsersAction") -> None:
    runs = subparsers.add_parser(
        "runs",
        help="list the local runs: id, models, state, spend",
        description="Every run directory under DIR (default ./reports), newest first, read without touching it.",
    )
    runs.add_argument("directory", nargs="?", default="reports", metavar="DIR")
    runs.add_argument(
        "--html", action="store_true", help="also write DIR/index.html: the list as a page, linking each leaderboard"
    )
    runs.set_defaults(handler=run_runs)


def run_mint(args: argparse.Namespace) -> int:
    from pytest_predbench.mint.build import MintError
    from pytest_predbench.mint.minting import mint
    from pytest_predbench.verify import pin, pool

    if args.bugs < 1:
        return usage_error(f"--bugs must be at least 1, got {args.bugs}")
    if args.seed < 0:
        return usage_error(f"--seed must be 0 or more, got {args.seed}")
    try:
        version = pin.check_version(args.pred_version or pin.DEFAULT_VERSION)
        manifest = mint(version, args.seed, args.bugs, args.out)
    except (pin.UnsupportedVersion, MintError, PredEnvironmentError, pool.PoolError) as exc:
        return usage_error(str(exc))
    except KeyboardInterrupt:
        print("predbench: mint interrupted: no pool was written", file=sys.stderr)
        return INTERRUPTED
    got = len(manifest.bugs)
    short = f" (fewer than the {args.bugs} asked for: see the dropped mutants above)" if got < args.bugs else ""
    print(
        f"minted {got} bug(s){short} on pred {version} in {manifest.built_in_rounds} build(s), "
        f"{manifest.seconds / 60:.1f} min: {args.out} (digest {manifest.digest[:12]})"
    )
    for bug in manifest.bugs:
        print(f"  {bug.id}  {bug.band:6} {bug.exposed}/{bug.probes} probes  {bug.file}")
    return OK if got == args.bugs else FAILED


def add_mint_command(subparsers: "argparse._SubParsersAction") -> None:
    mint = subparsers.add_parser(
        "mint",
        help="plant N fresh, validated bugs in a pinned version's rules: a hidden bug pool",
        description="Mutate N rule files of the pinned library (cargo-mutants), build pred and the extractor on "
        "the mutated source, and keep a mutant only when a probe's certificate is accepted on the minted build and "
        "rejected on the pristine one; write the pool (source, binaries, diffs, certificates, difficulties) to OUT. "
        "Exit 0 with N bugs, 1 with fewer, 2 on a usage error.",
    )
    add_version_option(mint)
    mint.add_argument("--seed", type=int, default=1, help="the seed of the mutants' choice (default 1)")
    mint.add_argument("--bugs", type=int, default=10, metavar="N", help="bugs to mint (default 10)")
    mint.add_argument("--out", type=Path, required=True, metavar="POOL", help="a new folder for the pool")
    mint.set_defaults(handler=run_mint)


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from pytest_predbench.verify import pin

    try:
        mine = version("predbench")
    except PackageNotFoundError:
        mine = "unknown (not installed)"
    others = [v for v in pin.supported() if v != pin.DEFAULT_VERSION]
    return f"predbench {mine} (pred {pin.DEFAULT_VERSION} by default; also {', '.join(others)})"


AddCommand = Callable[["argparse._SubParsersAction"], None]


def run_plan(args: argparse.Namespace) -> int:
    from pytest_predbench.run.costing import plan_cost
    from pytest_predbench.session.model_settings import SettingsError, UnknownModelError
    from pytest_predbench.state.plan import PlanError

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models:
        return usage_error("--models is empty: give a comma list of litellm model ids")
    try:
        cost = plan_cost(models, args.sessions, args.budget, args.model_settings)
    except (PlanError, UnknownModelError, SettingsError) as exc:
        return usage_error(str(exc).splitlines()[0])
    for line in cost.lines():
        print(line)
    return OK


def add_plan_command(subparsers: "argparse._SubParsersAction") -> None:
    plan = subparsers.add_parser(
        "plan",
        help="what a plan will cost at most and at typical use, from litellm's prices (no key, no call)",
        description="Price a plan before running it: per model, the most its money caps allow and what sessions "
        "that use every model call typically cost; names the budget that affords the call limit when it does not.",
    )
    plan.add_argument("--models", required=True, metavar="A,B", help="comma list of litellm model ids")
    plan.add_argument("--sessions", type=int, default=1, metavar="N", help="sessions per model (default 1)")
    plan.add_argument("--budget", type=float, default=1.0, metavar="DOLLARS", help="total budget (default 1.00)")
    plan.add_argument("--model-settings", metavar="FILE", help="model settings TOML (prices of unlisted models)")
    plan.set_defaults(handler=run_plan)


COMMANDS: list[AddCommand] = [
    add_plan_command,
    add_verify_commands,
    add_report_commands,
    add_runs_command,
    add_mint_command,
]


def build_parser(commands: list[AddCommand] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="predbench", description="predbench: AI bug-finding in pred's reductions")
    parser.add_argument("--version", action="version", version=version_text())
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in commands:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.handler(args)
    except LimitError as exc:  # pred's limits cannot be set on this machine: not about any input
        return usage_error(str(exc))
    except BrokenPipeError:
        # the reader went away (`predbench status RUN | head`): no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return FAILED
    except KeyboardInterrupt:
        print("predbench: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug of predbench's own: one line, not a traceback
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(
            f"predbench: internal error: {type(exc).__name__}: {first} (a bug of predbench; please report it)",
            file=sys.stderr,
        )
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
