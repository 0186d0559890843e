"""The swap point: one agent session behind a small protocol.

The orchestration, the verifier and the reports see only these models; which agent program
ran a session is known to exactly one class (MiniSweRunner, FakeRunner, or yours).
"""

from enum import StrEnum
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from pytest_predbench.verify.certificate import Certificate


class SessionLimits(BaseModel):
    """Hard limits of one session; identical for every model in a run (fairness)."""

    dollars: float = 0.10
    """Hard ceiling: no model call starts unless its worst case still fits."""
    model_calls: int = 30
    pred_calls: int = 60
    wall_seconds: float = 900.0
    call_timeout_s: float = 120.0
    max_output_tokens: int = 2048
    command_timeout_s: float = 60.0


class StopKind(StrEnum):
    SUBMITTED = "submitted"
    COST_LIMIT = "cost_limit"
    STEP_LIMIT = "step_limit"
    PRED_LIMIT = "pred_limit"
    TIME_LIMIT = "time_limit"
    FORMAT_ERRORS = "format_errors"
    INFRA_ERROR = "infra_error"
    ERROR = "error"


def exception_class(exc: BaseException) -> str:
    """The exception's full class name, as a StopReason records it."""
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def first_line(exc: BaseException) -> str:
    """The first line of the exception's message ("" when it has none): reasons stay one line."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


class StopReason(BaseModel):
    kind: StopKind
    exception_class: str | None = None
    """For infra_error and error: the class of the exception that ended the session."""
    detail: str = ""

    @property
    def is_infra(self) -> bool:
        """Infrastructure failures are not results: recorded, never scored, re-run on resume."""
        return self.kind is StopKind.INFRA_ERROR


class Accounting(BaseModel):
    dollars: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0
    shell_actions: int = 0
    pred_calls: int = 0
    wall_seconds: float = 0.0


class SessionEnv(BaseModel):
    """What a session may use: the pinned pred, the library source, and where to leave files."""

    pred_path: str
    source_dir: str
    extractor_path: str = ""
    """pred-extract, for mapping target solutions back (empty: the session has none)."""
    workdir: str
    """A private scratch directory for this session (the harness creates it)."""
    trajectory_path: str
    """Where the runner saves the session's trajectory."""
    session_id: str = ""
    seed: int = 0


class SessionResult(BaseModel):
    runner: str
    """Which runner produced this ('mini-swe', 'fake', ...): fake results are labelled as such."""
    model: str
    certificates: list[Certificate] = []
    rejected_submissions: int = 0
    """Submissions refused at the shape check (answered to the model, never counted)."""
    accounting: Accounting = Accounting()
    stop: StopReason
    trajectory_path: str | None = None
    prompt_hash: str = ""


class AgentRunner(Protocol):
    """Run one session of `model` under `limits`; never raise for the model's or provider's faults."""

    name: str

    def run(self, env: SessionEnv, model: str, limits: SessionLimits) -> SessionResult: ...


def trajectory_file(env: SessionEnv) -> Path:
    path = Path(env.trajectory_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
