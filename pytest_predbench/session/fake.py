"""FakeRunner — a FAKE agent for orchestration tests: no model call, no pred, canned output.

Its results say runner='fake' everywhere they are recorded, so they can never be mistaken
for a measurement of a model.
"""

import json
import random
import time

from pydantic import BaseModel

from pytest_predbench.session.protocol import (
    Accounting,
    SessionEnv,
    SessionInterrupted,
    SessionLimits,
    SessionResult,
    StopKind,
    StopReason,
    trajectory_file,
)
from pytest_predbench.verify.certificate import Certificate


class FakeSettings(BaseModel):
    cost: float = 0.01
    """Canned dollars per session (capped at the session's limit, as a real runner is)."""
    cost_jitter: float = 0.0
    """When > 0, cost is drawn uniformly from [cost - jitter, cost + jitter], seeded per session."""
    seconds: float = 0.0
    """Simulated model latency."""
    certificates: list[Certificate] = []
    stop: StopKind = StopKind.FINISHED


class FakeRunner:
    name = "fake"

    def __init__(self, settings: FakeSettings | None = None):
        self.settings = settings or FakeSettings()

    def run(self, env: SessionEnv, model: str, limits: SessionLimits) -> SessionResult:
        s = self.settings
        cost = s.cost
        if s.cost_jitter > 0:
            cost = random.Random(f"{env.seed}:{env.session_id}").uniform(s.cost - s.cost_jitter, s.cost + s.cost_jitter)
        cost = max(0.0, min(cost, limits.dollars))
        started = time.monotonic()
        try:
            if s.seconds:
                time.sleep(s.seconds)
        except KeyboardInterrupt:  # its canned spend accrues over its latency
            share = min(1.0, (time.monotonic() - started) / s.seconds)
            raise SessionInterrupted(self._result(env, model, round(cost * share, 9), StopKind.INTERRUPTED)) from None
        return self._result(env, model, round(cost, 9), s.stop)

    def _result(self, env: SessionEnv, model: str, dollars: float, stop: StopKind) -> SessionResult:
        s = self.settings
        trajectory = trajectory_file(env)
        trajectory.write_text(json.dumps({"fake": True, "model": model, "session": env.session_id}) + "\n")
        return SessionResult(
            runner=self.name,
            model=model,
            certificates=[] if stop is StopKind.INTERRUPTED else list(s.certificates),
            accounting=Accounting(dollars=dollars, model_calls=1, wall_seconds=s.seconds),
            stop=StopReason(kind=stop, detail="fake runner: canned result"),
            trajectory_path=str(trajectory),
        )
