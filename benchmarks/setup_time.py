"""Setup time: a fresh setup of one pred version (pred and the extractor, cache emptied) against a
bare `cargo install problemreductions-cli --version V --locked` on the same machine in the same
run. Target: at most 1.15 times the bare install.

    python -m benchmarks.setup_time [--pred-version 0.6.0] [--quick]

Both sides start from nothing of their own: the bare install builds in a fresh target directory
(cargo's default for `cargo install`), the setup in a fresh PREDBENCH_CACHE. Both share cargo's
download cache, so neither pays for the network. One repetition each, the bare install first: a
side takes 15-40 minutes on 2 cores. `--quick` checks the script only: the setup finds pred and
the extractor already built (symlinked from the real cache) and writes just the record, against
`cargo --version`.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import REPO, Figure, parser, report, timed
from pytest_predbench.verify import pin

TARGET_RATIO = 1.15


class Timings(BaseModel):
    version: str
    bare_seconds: float
    setup_seconds: float
    load_average: list[float]
    quick: bool = False


def _run(argv: list[str], env: dict[str, str], log: Path) -> None:
    with open(log, "w") as out:
        proc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-10:])
        raise RuntimeError(f"`{' '.join(argv)}` exited {proc.returncode}:\n{tail}")


def measure(version: str, quick: bool) -> Timings:
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-setup-"))
    env = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
    try:
        cache = scratch / "cache"
        cache.mkdir()
        if quick:
            for built in (pin.install_root(version), pin.extractor_root(version)):
                (cache / built.name).symlink_to(built)
            bare = ["cargo", "--version"]
        else:
            bare = [
                "cargo",
                "install",
                pin.PRED_CRATE,
                "--version",
                version,
                "--locked",
                "--root",
                str(scratch / "bare"),
            ]
        bare_seconds = timed(lambda: _run(bare, env, scratch / "bare.log"))
        setup = [sys.executable, "-m", "pytest_predbench.verify.setup", "--pred-version", version]
        setup_seconds = timed(lambda: _run(setup, {**env, "PREDBENCH_CACHE": str(cache)}, scratch / "setup.log"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Timings(
        version=version,
        bare_seconds=round(bare_seconds, 1),
        setup_seconds=round(setup_seconds, 1),
        load_average=[round(x, 2) for x in os.getloadavg()],
        quick=quick,
    )


def judge(t: Timings) -> Figure:
    ratio = t.setup_seconds / max(t.bare_seconds, 1e-9)
    return Figure(
        key="setup_time",
        title="setup time",
        value=ratio,
        target=TARGET_RATIO,
        unit="x",
        note=(
            f"a fresh setup of pred {t.version} (pred and the extractor) took {t.setup_seconds / 60:.1f} min, a bare "
            f"`cargo install {pin.PRED_CRATE} --version {t.version} --locked` {t.bare_seconds / 60:.1f} min; "
            f"load average {t.load_average} at the end"
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=1)
    parse.add_argument("--pred-version", default=pin.default_choice(), help="the version to set up (default 0.6.0)")
    args = parse.parse_args(argv)
    return report("setup time", lambda: judge(measure(pin.check_version(args.pred_version), args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
