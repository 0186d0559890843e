"""Prompt caching: what a long session costs with prompt caching against without, priced as a real
frontier model. Target: at most 0.35.

    python -m benchmarks.prompt_caching [--model anthropic/claude-sonnet-4-5] [--quick] [--json FILE]

The session is benchmarks/sessions/explorer.json, 30 scripted steps of the kind a real model takes
(reading rules, building instances, running pred, submitting a certificate), played by the demo
server into the real mini-swe-agent, litellm, sandbox and pred, twice: `--prompt-cache on` and
`off`. The demo server emulates Anthropic's explicit cache (see session/demo/server.py); the
prices, cache reads and writes included, are the model's own from litellm's price map, and litellm
prices every call. Dollars are deterministic (token counts, not timings), so one run of each side
is the figure. --quick stops both sessions after 6 calls: it shows the script works.
"""

import sys
import tempfile
import uuid
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import BENCH_DIR, Figure, parser, report
from pytest_predbench.session.protocol import Accounting, SessionEnv, SessionLimits, StopKind
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import checked_record

TARGET_RATIO = 0.35
SCRIPT = BENCH_DIR / "sessions" / "explorer.json"
PRICED_AS = "anthropic/claude-sonnet-4-5"
MIN_STEPS = 25
PRICE_KEYS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
)


class Side(BaseModel):
    stop: StopKind
    accounting: Accounting


class Timings(BaseModel):
    """Not timings: what each side of the session spent (the module name follows the others)."""

    priced_as: str
    prices: dict[str, float]
    cached: Side
    uncached: Side
    quick: bool = False


def settings_file(directory: Path, priced_as: str) -> tuple[Path, dict[str, float]]:
    """A model-settings file serving the script as demo/explorer at `priced_as`'s prices in litellm's map."""
    from pytest_predbench.session.model_settings import import_litellm

    info = import_litellm().get_model_info(priced_as)
    prices = {key: float(info[key]) for key in PRICE_KEYS if info.get(key)}
    if len(prices) < len(PRICE_KEYS):
        raise RuntimeError(f"{priced_as} has no cache prices in litellm's map: {sorted(prices)}")
    path = directory / "models.toml"
    lines = ['[models."demo/explorer"]', f'demo_script = "{SCRIPT}"', *(f"{k} = {v!r}" for k, v in prices.items())]
    path.write_text("\n".join(lines) + "\n")
    return path, prices


def measure(priced_as: str, quick: bool) -> Timings:
    from pytest_predbench.session.miniswe import MiniSweRunner

    record = checked_record(pin.default_choice())
    with tempfile.TemporaryDirectory(prefix="predbench-perf-cache-") as tmp:
        settings, prices = settings_file(Path(tmp), priced_as)
        runner = MiniSweRunner(settings)
        sides = {}
        for name, caching in (("cached", True), ("uncached", False)):
            env = SessionEnv(
                pred_version=record.pred_version,
                pred_path=record.pred_path,
                source_dir=record.source_dir,
                workdir=str(Path(tmp) / name / "scratch"),
                trajectory_path=str(Path(tmp) / name / "trajectory.json"),
                session_id=f"perf-cache-{name}-{uuid.uuid4().hex[:8]}",
            )
            limits = SessionLimits(dollars=20.0, prompt_cache=caching, **({"model_calls": 6} if quick else {}))
            result = runner.run(env, "demo/explorer", limits)
            sides[name] = Side(stop=result.stop.kind, accounting=result.accounting)
    return Timings(priced_as=priced_as, prices=prices, quick=quick, **sides)


def judge(t: Timings) -> Figure:
    cached, uncached = t.cached.accounting, t.uncached.accounting
    per_million = {key: f"${value * 1e6:g}/M" for key, value in t.prices.items()}
    ratio = cached.dollars / uncached.dollars
    steps = min(cached.model_calls, uncached.model_calls)
    return Figure(
        key="prompt_caching",
        title="prompt caching",
        value=ratio,
        target=TARGET_RATIO,
        unit=" of the uncached dollars",
        conditions={
            f"at least {MIN_STEPS} steps": steps >= MIN_STEPS,
            "both sessions finished": t.cached.stop is t.uncached.stop is StopKind.FINISHED,
            "the same conversation": cached.prompt_tokens == uncached.prompt_tokens,
        },
        note=(
            f"a {steps}-step scripted demo session priced as {t.priced_as} (litellm's map: "
            f"{per_million['input_cost_per_token']} input, {per_million['cache_read_input_token_cost']} cache read, "
            f"{per_million['cache_creation_input_token_cost']} cache write, "
            f"{per_million['output_cost_per_token']} output): ${cached.dollars:.4f} with prompt caching "
            f"({cached.cached_tokens} of {cached.prompt_tokens} prompt tokens read from the cache, "
            f"{cached.cache_write_tokens} written) vs ${uncached.dollars:.4f} without"
        ),
        raw=t.model_dump(mode="json"),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser(__doc__.splitlines()[0], repeat=1)
    parse.add_argument("--model", default=PRICED_AS, help=f"whose prices in litellm's map (default {PRICED_AS})")
    args = parse.parse_args(argv)
    return report("prompt caching", lambda: judge(measure(args.model, args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
