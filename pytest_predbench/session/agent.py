"""The agent stack, imported only when a real session or probe runs: mini-swe-agent's DefaultAgent
driven through litellm, with predbench's budget and sandbox in place of the stock model and
environment. session/miniswe.py imports this module lazily; importing it costs seconds (litellm).

- BudgetedModel: LitellmModel that refuses a call whose worst case would break the session's
  dollar ceiling, bills each answered call from the provider's usage, and redacts keys from
  the trajectory.
- SandboxEnvironment: mini-swe-agent's Environment protocol over the sandbox and the submission
  spool, counting pred calls and ending the session at its limits.
"""

import os
import re
import tempfile
import time
from typing import Any

from pydantic import BaseModel

from pytest_predbench.session import prompts
from pytest_predbench.session.model_settings import ModelSettings, import_litellm
from pytest_predbench.session.protocol import Accounting, SessionLimits
from pytest_predbench.session.sandbox import SCRATCH_DIR, SOURCE_DIR, Sandbox
from pytest_predbench.session.submission import SPOOL_DIR, Spool
from pytest_predbench.verify import pin


def _prepare_import_environment() -> None:
    """Quiet, offline, private: set before mini-swe-agent and litellm are first imported."""
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:  # no user's ~/.config/mini-swe-agent/.env
        os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="predbench-mswea-")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # One attempt per call: retrying with back-off is the orchestrator's business; a failure is infra_error.
    os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")


_prepare_import_environment()
litellm = import_litellm()

from minisweagent.agents.default import DefaultAgent  # noqa: E402 - after the environment above
from minisweagent.exceptions import FormatError, LimitsExceeded, Submitted, TimeExceeded  # noqa: E402
from minisweagent.models.litellm_model import LitellmModel  # noqa: E402
from minisweagent.models.utils.actions_toolcall import BASH_TOOL  # noqa: E402

FINISH_WORD = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
__all__ = ["DefaultAgent", "FormatError", "LimitsExceeded", "litellm"]


SECRET_NAME = re.compile(
    r"api[_-]?key|secret|password|credential|authorization|access[_-]?token|^token$", re.IGNORECASE
)


def redact(data: Any) -> Any:
    """`data` with the value of every secret-looking key replaced."""
    if isinstance(data, dict):
        return {k: "<redacted>" if SECRET_NAME.search(str(k)) else redact(v) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data


def exit_message(status: str, content: str = "") -> dict:
    return {"role": "exit", "content": content or status, "extra": {"exit_status": status, "submission": ""}}


class Meter:
    """One session's running accounting and the certificates it submitted."""

    def __init__(self, settings: ModelSettings, limits: SessionLimits):
        self.settings = settings
        self.limits = limits
        self.started = time.monotonic()
        self.accounting = Accounting()
        self.worst_case = 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def price(self, prompt_tokens: int, completion_tokens: int) -> float:
        per_input = self.settings.input_cost_per_token or 0.0
        per_output = self.settings.output_cost_per_token or 0.0
        return prompt_tokens * per_input + completion_tokens * per_output

    def charge(self, usage: Any) -> float:
        """Bill one answered call from the provider's usage; without usage, bill its worst case."""
        acct = self.accounting
        acct.model_calls += 1
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if isinstance(prompt, int) and isinstance(completion, int):
            cost = self.price(prompt, completion)
            acct.prompt_tokens += prompt
            acct.completion_tokens += completion
        else:
            cost = self.worst_case
        acct.dollars += cost
        return cost


class SandboxView(BaseModel):
    """What the trajectory records about the agent's environment."""

    limits: dict
    pred_version: str
    prompt_hash: str
    source_dir: str = SOURCE_DIR
    scratch_dir: str = SCRATCH_DIR
    submission_spool: str = SPOOL_DIR


class BudgetedModel(LitellmModel):
    """LitellmModel that refuses a call whose worst case would break the dollar ceiling."""

    def __init__(self, *, meter: Meter, **kwargs: Any):
        super().__init__(**kwargs)
        self.meter = meter
        self.last_prompt_tokens = 0
        """litellm's count of the last prompt sent (tools included)."""
        self.last_response: Any = None

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        m = self.meter
        if m.elapsed() >= m.limits.wall_seconds:
            raise TimeExceeded(exit_message("TimeExceeded", f"wall time of {m.limits.wall_seconds:.0f}s used up"))
        prompt = litellm.token_counter(
            model=self.config.model_name,
            messages=self._prepare_messages_for_api(messages),
            tools=[BASH_TOOL],
        )
        self.last_prompt_tokens = prompt
        m.worst_case = m.price(prompt, m.limits.max_output_tokens)
        if m.accounting.dollars + m.worst_case > m.limits.dollars:
            raise LimitsExceeded(
                exit_message(
                    "CostLimitExceeded",
                    f"spent ${m.accounting.dollars:.6f}; the next call may cost up to "
                    f"${m.worst_case:.6f}, over the ${m.limits.dollars} limit",
                )
            )
        return super().query(messages, **kwargs)

    def _calculate_cost(self, response: Any) -> dict[str, float]:
        self.last_response = response
        return {"cost": self.meter.charge(getattr(response, "usage", None))}

    def serialize(self) -> dict:
        """The stock record, with API keys and auth headers blanked: trajectories go into reports."""
        return redact(super().serialize())


class SandboxEnvironment:
    """mini-swe-agent's Environment protocol over the sandbox and the submission spool."""

    def __init__(self, *, sandbox: Sandbox, spool: Spool, meter: Meter):
        self.sandbox = sandbox
        self.spool = spool
        self.meter = meter
        self.config = SandboxView(
            limits=meter.limits.model_dump(),
            pred_version=pin.PRED_VERSION,
            prompt_hash=prompts.prompt_hash(),
        )

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        m, limits = self.meter, self.meter.limits
        self.sandbox.set_pred_quota(limits.pred_calls - m.accounting.pred_calls)
        allowed = max(1.0, min(limits.command_timeout_s, limits.wall_seconds - m.elapsed()))
        result = self.sandbox.run(action.get("command", ""), timeout=allowed)
        m.accounting.shell_actions += 1
        pred = self.sandbox.take_pred_usage()
        m.accounting.pred_calls += pred.calls
        notes = [receipt.message() for receipt in self.spool.collect()]
        if pred.refused:
            notes.append(f"[harness] the limit of {limits.pred_calls} pred calls is used up")
        output = {
            "output": result.output + "".join(f"\n{note}" for note in notes),
            "returncode": -1 if result.timed_out else result.returncode,
            "exception_info": f"the command timed out after {allowed:.0f}s and was killed" if result.timed_out else "",
        }
        if pred.refused or m.accounting.pred_calls > limits.pred_calls:
            raise LimitsExceeded(exit_message("PredLimitExceeded", output["output"]))
        lines = result.output.lstrip().splitlines()
        if lines and lines[0].strip() == FINISH_WORD and result.returncode == 0:
            raise Submitted(exit_message("Submitted", "the agent finished"))
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        limits = self.meter.limits
        return {
            "scratch_dir": SCRATCH_DIR,
            "source_dir": SOURCE_DIR,
            "pred_version": pin.PRED_VERSION,
            "pred_call_limit": limits.pred_calls,
            "command_timeout": int(limits.command_timeout_s),
            **kwargs,
        }

    def serialize(self) -> dict:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(mode="json"),
                    "environment_type": "pytest_predbench.session.sandbox.Sandbox",
                }
            }
        }
