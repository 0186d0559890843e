"""One opencode session run directly (OpenCodeRunner.run, no plugin), as the opencode tests drive it:
the real binary, sandbox, pred and metered endpoint; only the model's replies are scripted
(tests/scripts/models.toml, at PRICES)."""

import uuid
from pathlib import Path

from pytest_predbench.session.opencode import OpenCodeRunner
from pytest_predbench.session.protocol import SessionEnv, SessionLimits, SessionResult
from pytest_predbench.verify.environment import EnvRecord

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
TEST_MODELS = SCRIPTS / "models.toml"
PRICES = {"in": 1e-6, "out": 4e-6}  # tests/scripts/models.toml
OUTPUT_TOKENS = 1000


def run_session(
    runner: OpenCodeRunner, record: EnvRecord, root: Path, model: str, prefix: str = "test", **limits: object
) -> tuple[SessionEnv, SessionResult]:
    """The session's environment (its scratch and trajectory under `root`) and its result."""
    env = SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        source_dir=record.source_dir,
        extractor_path=record.extractor_path,
        workdir=str(root / "scratch"),
        trajectory_path=str(root / "reports" / "trajectory.json"),
        session_id=f"{prefix}-{uuid.uuid4().hex}",
    )
    return env, runner.run(env, model, SessionLimits(max_output_tokens=OUTPUT_TOKENS, **limits))
