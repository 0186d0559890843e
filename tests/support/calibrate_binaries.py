"""Run a calibration folder (or any certificates) through the real verifier on given binaries.

A research tool for a new pred version (issue 22): it builds an environment record from the pred,
library source and pred-extract named on the command line — not from the cache's record, which
setup writes for one version at a time — and verifies each certificate with it. A certificate with
an expected sidecar (`expected/NAME.json`, verify/calibration.py) is compared with it; one without
is only reported (the end-to-end certificates under tests/data/):

    PREDBENCH_PRED_VERSION=0.6.0 .venv/bin/python tests/support/calibrate_binaries.py \
        --pred ~/.cache/predbench/pred-0.6.0/bin/pred \
        --source ~/.cargo/registry/src/*/problemreductions-0.6.0 \
        --extractor PATH/pred-extract fixtures/calibration/0.6.0 [--json out.json]

Exit 0 when every case with a sidecar gets its expected verdict, 1 otherwise.
"""

import argparse
import json
import sys
from pathlib import Path

from pytest_predbench.verify import pin

if not hasattr(pin, "PRED_VERSION"):  # main's versions-as-data work in progress: the chosen version
    pin.PRED_VERSION = pin.selected()  # type: ignore[attr-defined]

from pytest_predbench.verify.calibration import expected_path, failing_check, run_case  # noqa: E402
from pytest_predbench.verify.environment import build_record  # noqa: E402
from pytest_predbench.verify.verifier import verify_file  # noqa: E402


def certificates(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        found += sorted(path.glob("*.json")) if path.is_dir() else [path]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pred", type=Path, required=True)
    parser.add_argument("--source", type=Path, required=True, help="the library crate's source folder")
    parser.add_argument("--extractor", type=Path, required=True)
    parser.add_argument("--json", type=Path, help="write every verdict here")
    parser.add_argument("paths", type=Path, nargs="+", help="certificates or folders of them")
    args = parser.parse_args(argv)
    record = build_record(binary=args.pred, source=args.source, extractor=args.extractor)
    print(f"pred {record.pred_version} at {record.pred_path}; pred-extract {record.extractor_sha256[:12]}")
    failed, verdicts = 0, {}
    for path in certificates(args.paths):
        if expected_path(path).is_file():
            outcome = run_case(path, record)
            verdict, line = outcome.verdict, outcome.line()
            failed += not outcome.ok
        else:
            verdict = verify_file(path, record)
            got = verdict.outcome.value + ("" if verdict.accepted else f" at {failing_check(verdict)}")
            line = f"--   {path.stem}: {got} (no expected verdict)"
        verdicts[str(path)] = verdict.model_dump(mode="json")
        print(f"{line}\n       {verdict.reason[:400]}")
    if args.json:
        args.json.write_text(json.dumps(verdicts, indent=2) + "\n")
    print(f"{len(verdicts)} certificates, {failed} not as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
