"""The agent stack, imported only when a real session or probe runs: mini-swe-agent's DefaultAgent
driven through litellm, with predbench's budget and sandbox in place of the stock model and
environment. session/miniswe.py imports this module lazily; importing it costs seconds (litellm).

- BudgetedModel: LitellmModel that refuses a call whose worst case would break the session's
  dollar ceiling, retries a call after a transient provider error (retries.py), marks the prompt
  for the provider's cache where it needs that, bills each answered call as litellm prices the
  provider's usage, and redacts keys from the trajectory.
- SandboxEnvironment: mini-swe-agent's Environment protocol over the sandbox and the submission
  spool, taking the pred calls the gateway booked, ending every observation with the budget line, and ending the
  session at its limits.
"""

import os
import random
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from pytest_predbench.session import model_settings, prompts
from pytest_predbench.session.gateway import REFUSED_EXIT
from pytest_predbench.session.model_settings import ModelSettings, import_litellm
from pytest_predbench.session.observation import budget_line, harness_notes
from pytest_predbench.session.progress import report_progress
from pytest_predbench.session.protocol import Accounting, SessionLimits
from pytest_predbench.session.retries import Backoff, Retried, is_transient, with_retries
from pytest_predbench.session.sandbox import SCRATCH_DIR, SOURCE_DIR, Sandbox
from pytest_predbench.session.submission import SPOOL_DIR, Spool


def _prepare_import_environment() -> None:
    """Quiet, offline, private: set before mini-swe-agent and litellm are first imported."""
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:  # no user's ~/.config/mini-swe-agent/.env
        os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="predbench-mswea-")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # One attempt in mini-swe-agent's own loop: BudgetedModel retries, within the session's limits.
    os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")


_prepare_import_environment()
litellm = import_litellm()

from minisweagent.agents.default import DefaultAgent  # noqa: E402 - after the environment above
from minisweagent.exceptions import FormatError, LimitsExceeded, Submitted, TimeExceeded  # noqa: E402
from minisweagent.models.litellm_model import LitellmModel  # noqa: E402
from minisweagent.models.utils.actions_toolcall import BASH_TOOL  # noqa: E402

FINISH_WORD = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
OBSERVATION_TEMPLATE = (
    "{% if output.exception_info %}<exception>{{output.exception_info}}</exception>\n{% endif %}"
    "<returncode>{{output.returncode}}</returncode>\n<output>\n{{output.output}}</output>"
    "{% if output.get('budget') %}\n{{output.budget}}{% endif %}"
)
"""mini-swe-agent's observation, ended by the harness's budget line (observation.budget_line)."""
__all__ = ["DefaultAgent", "FormatError", "LimitsExceeded", "litellm"]


def redact(data: Any) -> Any:
    """`data` with the value of every secret-looking key replaced."""
    if isinstance(data, dict):
        return {k: "<redacted>" if model_settings.SECRET_NAME.search(str(k)) else redact(v) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data


def exit_message(status: str, content: str = "") -> dict:
    return {"role": "exit", "content": content or status, "extra": {"exit_status": status, "submission": ""}}


class Meter:
    """One session's running accounting, its model's rates, and its clock."""

    def __init__(self, settings: ModelSettings, limits: SessionLimits):
        self.settings = settings
        self.limits = limits
        self.started = time.monotonic()
        self.accounting = Accounting()
        self.rates = model_settings.price_rates(settings, caching=limits.prompt_cache)
        self.worst_case = 0.0
        """The worst case of the call being made (billed in full if the provider reports no usage)."""
        self.progress_path = ""
        """Where the figures so far go after each step (session/progress.py)."""
        self.in_flight = False
        """A model call was sent and neither answered nor failed: the provider may bill it."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def retried(self, call: Callable[[], Any], *, backoff: Backoff, rng: random.Random, done: Retried) -> Any:
        """`call()`, retried after transient errors: at most `call_retries` more attempts, each after
        its back-off, and none that would start past the session's wall time (retries.with_retries);
        the retries and their waits are booked into the accounting whatever happens, `done` says how
        it went. Every metered model call of any agent goes through here."""
        try:
            return with_retries(
                call,
                transient=lambda exc: is_transient(exc, litellm),
                backoff=backoff,
                rng=rng,
                retries=self.limits.call_retries,
                seconds_left=lambda: self.limits.wall_seconds - self.elapsed(),
                done=done,
            )
        finally:
            self.accounting.call_retries += done.retries
            self.accounting.call_retry_seconds = round(self.accounting.call_retry_seconds + done.waited_s, 3)

    def price(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The worst case: no cache discount, the highest tier (pricing.Rates.worst_case)."""
        return self.rates.worst_case(prompt_tokens, completion_tokens)

    def reserve(self, prompt_tokens: int, output_tokens: int | None = None) -> str:
        """Before a call of `prompt_tokens`: its worst case (that prompt and the full output limit, or
        `output_tokens` for a call the harness caps lower) is reserved and the call marked in flight,
        or, when the worst case could cross the dollar ceiling, nothing is reserved and the reason is
        returned (every runner's calls pass here)."""
        output = self.limits.max_output_tokens if output_tokens is None else output_tokens
        self.worst_case = self.price(prompt_tokens, output)
        if self.accounting.dollars + self.worst_case > self.limits.dollars:
            return (
                f"spent ${self.accounting.dollars:.6f}; the next call may cost up to "
                f"${self.worst_case:.6f}, over the ${self.limits.dollars} limit"
            )
        self.in_flight = True
        return ""

    def interrupted(self) -> float:
        """Ctrl-C or SIGTERM came: a call in flight is billed at its worst case (the provider may bill
        what it generated, and nobody will hear what), so the charge stays an upper bound. Returns
        that worst case (0 when no call was in flight)."""
        if not self.in_flight:
            return 0.0
        self.in_flight = False
        self.accounting.dollars += self.worst_case
        return self.worst_case

    def charge(self, response: Any) -> float:
        """Bill one answered call as litellm prices the provider's usage; without usage, its worst case."""
        self.in_flight = False
        acct = self.accounting
        acct.model_calls += 1
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if not (isinstance(prompt, int) and isinstance(completion, int)):
            acct.dollars += self.worst_case
            return self.worst_case
        try:
            cost = float(litellm.completion_cost(completion_response=response, model=self.settings.call_name))
        except Exception:  # litellm cannot price this answer: bill its worst case, never less
            cost = self.worst_case
        acct.prompt_tokens += prompt
        acct.completion_tokens += completion
        acct.cached_tokens += _count(getattr(usage, "prompt_tokens_details", None), "cached_tokens")
        acct.cache_write_tokens += _count(usage, "cache_creation_input_tokens") or _count(
            getattr(usage, "prompt_tokens_details", None), "cache_creation_tokens"
        )
        acct.reasoning_tokens += _count(getattr(usage, "completion_tokens_details", None), "reasoning_tokens")
        acct.dollars += cost
        return cost


def _count(holder: Any, name: str) -> int:
    value = getattr(holder, name, None)
    return value if isinstance(value, int) and value > 0 else 0


class SandboxView(BaseModel):
    """What the trajectory records about the agent's environment."""

    limits: dict
    pred_version: str
    prompt_hash: str
    source_dir: str = SOURCE_DIR
    scratch_dir: str = SCRATCH_DIR
    submission_spool: str = SPOOL_DIR
    bounds: dict = {}
    """Which of the session's bounds the kernel enforced, and how (bounds.Enforcement)."""


def cache_marked(messages: list[dict]) -> list[dict]:
    """`messages` with mini-swe-agent's prompt-cache marks (its own set_cache_control, as a
    mini-swe session sets them), for an agent whose requests the harness forwards (opencode)."""
    from minisweagent.models.utils.cache_control import set_cache_control

    return set_cache_control(messages, mode="default_end")


class BudgetedModel(LitellmModel):
    """LitellmModel that refuses a call whose worst case would break the dollar ceiling, and
    retries a call after a transient provider error while the session's time allows."""

    def __init__(self, *, meter: Meter, backoff: Backoff | None = None, seed: str = "", **kwargs: Any):
        super().__init__(**kwargs)
        self.meter = meter
        self.backoff = backoff or Backoff()
        self.rng = random.Random(seed)
        """Jitter of the back-off, seeded by the session (reproducible, yet different per session)."""
        self.last_prompt_tokens = 0
        """litellm's count of the last prompt sent (tools included)."""
        self.last_response: Any = None
        self.gave_up_after: int | None = None
        """Set when a transient failure ended the session: after how many retries."""

    def _query(self, messages: list[dict], **kwargs: Any) -> Any:
        """One call, retried after transient errors: at most `call_retries` more attempts, each after
        its back-off, and none that would start past the session's wall time (retries.with_retries)."""
        done = Retried()
        try:
            call = lambda: super(BudgetedModel, self)._query(messages, **kwargs)  # noqa: E731
            return self.meter.retried(call, backoff=self.backoff, rng=self.rng, done=done)
        finally:
            if done.gave_up_after is not None:
                self.gave_up_after = done.gave_up_after

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
        refusal = m.reserve(prompt)
        if refusal:
            raise LimitsExceeded(exit_message("CostLimitExceeded", refusal))
        try:
            return super().query(messages, **kwargs)
        except Exception:
            m.in_flight = False  # the provider failed: nothing answered, nothing billed
            raise

    def _calculate_cost(self, response: Any) -> dict[str, float]:
        self.last_response = response
        return {"cost": self.meter.charge(response)}

    def serialize(self) -> dict:
        """The stock record, with API keys and auth headers blanked: trajectories go into reports."""
        return redact(super().serialize())


class SandboxEnvironment:
    """mini-swe-agent's Environment protocol over the sandbox and the submission spool."""

    def __init__(self, *, sandbox: Sandbox, spool: Spool, meter: Meter, pred_version: str):
        self.sandbox = sandbox
        self.spool = spool
        self.meter = meter
        self.pred_version = pred_version
        self.config = SandboxView(
            limits=meter.limits.model_dump(),
            pred_version=pred_version,
            prompt_hash=prompts.prompt_hash(pred_version),
            bounds=sandbox.enforcement.model_dump() if sandbox is not None else {},
        )

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        m, limits = self.meter, self.meter.limits
        self.sandbox.set_pred_quota(limits.pred_calls - m.accounting.pred_calls)
        allowed = max(1.0, min(limits.command_timeout_s, limits.wall_seconds - m.elapsed()))
        result = self.sandbox.run(action.get("command", ""), timeout=allowed)
        m.accounting.shell_actions += 1
        pred = self.sandbox.take_pred_usage()
        m.accounting.pred_calls += pred.calls
        notes = [f"[harness] {result.killed}"] if result.killed else []
        notes += [receipt.message() for receipt in self.spool.collect()]
        if pred.refused:
            notes.append(f"[harness] the limit of {limits.pred_calls} pred calls is used up")
        report_progress(m.progress_path, m.accounting, m.accounting.model_calls, m.elapsed())
        output = {
            "output": result.output + harness_notes(notes),
            "budget": budget_line(m.accounting, limits, m.elapsed()),
            "returncode": -1 if result.timed_out else result.returncode,
            "exception_info": f"the command timed out after {allowed:.0f}s and was killed" if result.timed_out else "",
        }
        if pred.refused or m.accounting.pred_calls > limits.pred_calls:
            raise LimitsExceeded(exit_message("PredLimitExceeded", output["output"]))
        lines = result.output.lstrip().splitlines()
        if lines and lines[0].strip() == FINISH_WORD and result.returncode == 0:
            submitted = len(self.spool.accepted)
            raise Submitted(exit_message("Submitted", f"the model finished with {submitted} certificate(s) submitted"))
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        limits = self.meter.limits
        return {
            "scratch_dir": SCRATCH_DIR,
            "source_dir": SOURCE_DIR,
            "pred_version": self.pred_version,
            "pred_call_limit": limits.pred_calls,
            "refused_exit": REFUSED_EXIT,
            "memory_mib": limits.memory_mib,
            "processes": limits.processes,
            "disk_mib": limits.disk_mib,
            "command_timeout": int(limits.command_timeout_s),
            "finish_word": FINISH_WORD,
            **prompts.brute_force_reach(limits.command_timeout_s),
            "prompt_facts": prompts.prompt_facts(self.pred_version),
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
