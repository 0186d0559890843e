"""Gateway overhead: a pred call through the pred gateway against the same call run directly, as a
ratio measured in one run. Target: at most 1.3 for `pred list --rules`.

    python -m benchmarks.gateway_overhead [--repeat 7] [--calls 20] [--quick] [--json FILE]

Both sides run in a session's sandbox (submission.channel_sandbox, with its bounds), in one sandbox
command that times a loop of `--calls` calls with bash's $EPOCHREALTIME, so the sandbox's own
start is outside both. The gateway side is what the agent runs: `pred list --rules` (the client,
the socket, the booking, the gateway's own sandbox around the real binary, the output relayed). The
direct side is the same loop calling the real binary bound into the same sandbox
(/predbench/libexec/pred, as the counting wrapper of earlier versions ran it). The two loops
alternate, and the figure is the median of the per-repetition ratios. The note also gives the
time of a call on the host with nothing around it, and the per-call overhead in milliseconds.
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, parser, repetitions, report, rounded
from pytest_predbench.session.sandbox import Sandbox
from pytest_predbench.session.submission import channel_sandbox
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import checked_record

TARGET = 1.3
ARGS = "list --rules"
DIRECT = "/predbench/libexec/pred"


class Timings(BaseModel):
    calls: int
    gateway: list[float]
    """Seconds per call through the gateway, one value per repetition."""
    direct: list[float]
    """Seconds per call of the real binary in the same sandbox."""
    host: list[float]
    """Seconds per call on the host, nothing around it."""
    booked: int
    """Calls the gateway booked over the whole run: every gateway call, exactly once."""
    expected: int
    quick: bool = False


def loop(program: str, calls: int) -> str:
    """One sandbox command: `calls` calls of `program`, timed inside, printed as seconds per call."""
    return (
        f"s=$EPOCHREALTIME; for i in $(seq {calls}); do {program} {ARGS} > /dev/null || exit 3; done; "
        f'e=$EPOCHREALTIME; awk "BEGIN {{ print ($e - $s) / {calls} }}"'
    )


def per_call(sandbox: Sandbox, program: str, calls: int) -> float:
    result = sandbox.run(loop(program, calls), timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"`{program} {ARGS}` failed in the sandbox: {result.output.strip()[-300:]}")
    return float(result.output.strip().splitlines()[-1])


def measure(repeat: int, calls: int, quick: bool) -> Timings:
    record = checked_record(pin.default_choice())
    with tempfile.TemporaryDirectory(prefix="predbench-perf-gw-") as tmp:
        sandbox, _ = channel_sandbox(
            pred_path=Path(record.pred_path),
            extractor_path=Path(record.extractor_path),
            source_dir=Path(record.source_dir),
            state_dir=Path(tmp),
        )
        real = ["--ro-bind", str(Path(record.pred_path).resolve()), DIRECT]
        base_options = sandbox.options
        sandbox.options = lambda status_fd=None: [*real, *base_options(status_fd)]  # type: ignore[method-assign]
        try:
            gateway, direct, host = [], [], []
            per_call(sandbox, "pred", 2)  # warm both paths (page cache), not counted
            per_call(sandbox, DIRECT, 2)
            for n in range(repeat):
                sides = [("g", "pred"), ("d", DIRECT)]
                for side, program in sides if n % 2 == 0 else sides[::-1]:
                    (gateway if side == "g" else direct).append(per_call(sandbox, program, calls))
                start = time.perf_counter()
                for _ in range(calls):
                    subprocess.run([record.pred_path, *ARGS.split()], capture_output=True, check=True)
                host.append((time.perf_counter() - start) / calls)
            booked = sandbox.take_pred_usage().calls
        finally:
            sandbox.close()
    return Timings(
        calls=calls,
        gateway=rounded(gateway, 5),
        direct=rounded(direct, 5),
        host=rounded(host, 5),
        booked=booked,
        expected=2 + repeat * calls,
        quick=quick,
    )


def judge(t: Timings) -> Figure:
    ratios = [g / d for g, d in zip(t.gateway, t.direct, strict=True)]
    gateway, direct, host = (statistics.median(v) for v in (t.gateway, t.direct, t.host))
    return Figure(
        key="gateway_overhead",
        title="gateway overhead",
        value=statistics.median(ratios),
        target=TARGET,
        conditions={"every gateway call booked once": t.booked == t.expected},
        note=(
            f"`pred {ARGS}` through the gateway {gateway * 1000:.1f} ms per call, the real binary in the same "
            f"sandbox {direct * 1000:.1f} ms (+{(gateway - direct) * 1000:.1f} ms a call), on the host "
            f"{host * 1000:.1f} ms (ratio {gateway / host:.2f}); median of {len(ratios)} repetitions of "
            f"{t.calls} calls"
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=7)
    parse.add_argument("--calls", type=int, default=20, help="calls per timed loop (default 20)")
    args = parse.parse_args(argv)
    calls = 3 if args.quick else max(1, args.calls)
    return report("gateway overhead", lambda: judge(measure(repetitions(args), calls, args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
