"""Replay every entry of a known-bug registry against a given pred binary and say which reproduce.

A research tool for building a registry for a new pred version (issue 22): it writes each entry's
instance and one-step path into a scratch directory laid out as the entry's commands expect
(`instances/<id>.json`, `instances/<id>.via.json`), runs the commands with `pred` replaced by the
given binary, and judges the outcome the way tests/test_known_bugs.py does (a panic, a target
solution that extracts to an invalid source config, or an extraction worse than the source's own
optimum). Stdlib only, so it runs without the project's environment:

    python3 tests/support/replay_known_bugs.py --pred ~/.cache/predbench/pred-0.6.0/bin/pred \
        --registry pytest_predbench/verify/known_bugs.json [--json out.json] [--only ID ...]

Exit 0 when every entry with a reproduction reproduces, 1 otherwise.
"""

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT = 60  # seconds per pred call; the commands carry their own `timeout 30` as well


def run(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {TIMEOUT}s"
    return done.returncode, done.stdout, done.stderr


def as_json(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def last_line(text: str) -> str:
    """pred's one-line `Error: ...` when there is one (a backtrace may follow it), else the last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    return (errors or lines or [""])[-1][:200]


def panic_message(stderr: str) -> str:
    """Rust's panic report: where it panicked, then the message on the next line."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if "panicked at" in line:
            where = line.split("panicked at", 1)[1].strip().rstrip(":").split("/src/index.crates.io-")[-1]
            where = where.split("/", 1)[-1]  # problemreductions-X/src/rules/file.rs:line:col
            message = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"{message[:160]} ({where})"
    return last_line(stderr)


def judge(solved: dict, direct: dict | None) -> str | None:
    """What a finished round trip shows wrong, or None (the same test as tests/test_known_bugs.py)."""
    target = (solved.get("intermediate") or {}).get("evaluation")
    extracted = solved.get("evaluation") or ""
    if target and not target.endswith("(None)") and target != "Or(false)" and extracted == "Or(false)":
        return f"target {target} extracts to {extracted}"
    if extracted.endswith("(None)"):
        return f"target {target} extracts to {extracted}"
    if direct and extracted and direct.get("evaluation") != extracted:
        return f"extracts to {extracted}, the source's optimum is {direct.get('evaluation')}"
    return None


def replay(entry: dict, pred: Path, tries: int) -> dict:
    """One entry: status reproduces | no_bug_shown | reduce_refused | solve_refused | timeout | skipped."""
    row = {"id": entry["id"], "rule_spec": entry.get("rule_spec", entry.get("rule", "")), "kind": entry["kind"]}
    repro = entry.get("repro") or {}
    if not (entry.get("instance") and entry.get("via") and repro.get("commands")):
        return {**row, "status": "skipped", "detail": "no instance, path or commands (not observable by round trip)"}
    outcome: dict = {}
    for _ in range(tries):
        outcome = replay_once(entry, pred)
        if outcome["status"] == "reproduces":
            break
    return {**row, **outcome}


def replay_once(entry: dict, pred: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="replay-") as scratch:
        cwd = Path(scratch)
        (cwd / "instances").mkdir()
        (cwd / "instances" / f"{entry['id']}.json").write_text(json.dumps(entry["instance"]))
        (cwd / "instances" / f"{entry['id']}.via.json").write_text(json.dumps(entry["via"]))
        solved = None
        for command in entry["repro"]["commands"]:
            argv = [str(pred) if word == "pred" else word for word in shlex.split(command)]
            verb = argv[argv.index(str(pred)) + 1]
            code, out, err = run(argv, cwd)
            if code == 101:
                return {"status": "reproduces", "detail": f"{verb} panics: {panic_message(err)}"}
            if code == 124:
                return {"status": "timeout", "detail": f"{verb} timed out"}
            if code != 0:
                return {"status": f"{verb}_refused", "detail": f"{verb} exit {code}: {last_line(err)}"}
            if verb in ("solve", "extract"):  # both print the round trip: source, target and their evaluations
                solved = as_json(out)
        if solved is None:
            return {"status": "no_bug_shown", "detail": "the commands ran without a panic"}
        _, out, _ = run([str(pred), "solve", f"instances/{entry['id']}.json", "--solver", "brute-force"], cwd)
        direct = as_json(out)
        shown = judge(solved, direct)
        target = (solved.get("intermediate") or {}).get("evaluation")
        optimum = (direct or {}).get("evaluation")
        seen = f"target {target}, extracted {solved.get('evaluation')}, source optimum {optimum}"
        return {"status": "reproduces", "detail": shown} if shown else {"status": "no_bug_shown", "detail": seen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pred", required=True, type=Path, help="the pred binary to replay against")
    parser.add_argument("--registry", required=True, type=Path, help="a known_bugs.json")
    parser.add_argument("--only", nargs="*", default=[], help="replay only these entry ids")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--tries", type=int, default=20, help="tries for entries marked probabilistic")
    args = parser.parse_args()
    if not args.pred.is_file():
        print(f"no pred binary at {args.pred}", file=sys.stderr)
        return 2
    try:
        entries = json.loads(args.registry.read_text())["bugs"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"cannot read the registry {args.registry}: {exc}", file=sys.stderr)
        return 2
    rows = []
    for entry in entries:
        if args.only and entry["id"] not in args.only:
            continue
        tries = args.tries if "probabilistic" in (entry.get("confidence") or "") else 1
        row = replay(entry, args.pred.resolve(), tries)
        rows.append(row)
        print(f"{row['status']:<14} {row['id']:<62} {row['detail']}", flush=True)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    print("; ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(row["status"] in ("reproduces", "skipped") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
