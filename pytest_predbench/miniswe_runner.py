"""MiniSweRunner: one bug-hunting session with mini-swe-agent's DefaultAgent and litellm.

The only module that imports mini-swe-agent or litellm, and only inside `run`: importing
it (to plan, to validate --models, to report) costs nothing.

What predbench adds to the stock agent, every piece the same for every model:
- its own prompt (prompts/*.j2, hashed into the result) and the `bash` tool;
- a bubblewrap sandbox for every command (sandbox.py), bounded observations, and the
  `submit-certificate` channel (submission.py) — the only way a certificate counts;
- limits enforced here, not by the model: dollars as a hard ceiling (before each call its
  worst case — litellm's count of the prompt plus the maximum output, at the model's price —
  must still fit), model calls, pred calls, wall time, and a timeout on every call;
- accounting from the provider's reported usage times the price, and a stop reason that
  tells infrastructure failures (not results) from everything else.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel

from pytest_predbench import pin, prompts
from pytest_predbench.model_settings import ModelSettings, import_litellm, load_settings, resolve
from pytest_predbench.runner import (
    Accounting,
    SessionEnv,
    SessionLimits,
    SessionResult,
    StopKind,
    StopReason,
    exception_class,
    first_line,
    trajectory_file,
)
from pytest_predbench.sandbox import SCRATCH_DIR, SOURCE_DIR, Sandbox, SandboxError
from pytest_predbench.submission import SPOOL_DIR, SUBMIT_SCRIPT, Spool

FINISH_WORD = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
DEMO_API_KEY = "predbench-demo"
"""Any key will do for the demo server; real providers' keys come from their usual variables."""

EXIT_STATUS_STOPS = {
    "Submitted": StopKind.SUBMITTED,
    "LimitsExceeded": StopKind.STEP_LIMIT,
    "CostLimitExceeded": StopKind.COST_LIMIT,
    "PredLimitExceeded": StopKind.PRED_LIMIT,
    "TimeExceeded": StopKind.TIME_LIMIT,
    "RepeatedFormatError": StopKind.FORMAT_ERRORS,
}

INFRA_EXCEPTIONS = (
    "RateLimitError", "APIConnectionError", "Timeout", "InternalServerError", "ServiceUnavailableError",
    "BadGatewayError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "APIResponseValidationError",
)  # fmt: skip
"""litellm exceptions that mean the provider did not answer usefully: not a result of the model."""


def _prepare_import_environment() -> None:
    """Quiet, offline, private: set before mini-swe-agent and litellm are first imported."""
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:  # no user's ~/.config/mini-swe-agent/.env
        os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="predbench-mswea-")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # One attempt per call: retrying with back-off is the orchestrator's business; a failure is infra_error.
    os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")


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


@cache
def _agent_stack() -> SimpleNamespace:
    """Import mini-swe-agent and litellm, and build the classes that depend on them."""
    _prepare_import_environment()
    litellm = import_litellm()
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.exceptions import FormatError, LimitsExceeded, Submitted, TimeExceeded
    from minisweagent.models.litellm_model import LitellmModel
    from minisweagent.models.utils.actions_toolcall import BASH_TOOL

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
                "exception_info": f"the command timed out after {allowed:.0f}s and was killed"
                if result.timed_out
                else "",
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
                        "environment_type": "pytest_predbench.sandbox.Sandbox",
                    }
                }
            }

    return SimpleNamespace(
        litellm=litellm,
        DefaultAgent=DefaultAgent,
        BudgetedModel=BudgetedModel,
        SandboxEnvironment=SandboxEnvironment,
        FormatError=FormatError,
        LimitsExceeded=LimitsExceeded,
    )


class SandboxView(BaseModel):
    """What the trajectory records about the agent's environment."""

    limits: dict
    pred_version: str
    prompt_hash: str
    source_dir: str = SOURCE_DIR
    scratch_dir: str = SCRATCH_DIR
    submission_spool: str = SPOOL_DIR


PROBE_OUTPUT_TOKENS = 64
"""Nobody reads the probe's answer: a short one keeps its cost down (its prompt is full size)."""


class ProbeResult(BaseModel):
    """One call made exactly as a session's first one, for preflight: who answered, at what size and price."""

    model: str
    session_id: str
    """Sent as the demo server's session header, so its usage log can be read back."""
    requested: str = ""
    """The model name the provider was asked for (litellm's provider prefix removed)."""
    answered_as: str | None = None
    """The model name in the provider's response; None when the call failed."""
    prompt_tokens_counted: int = 0
    """litellm's count of what was sent: a session's system and task messages and the bash tool."""
    prompt_tokens: int | None = None
    """The provider's own count (None: it reported no usage)."""
    completion_tokens: int | None = None
    dollars: float = 0.0
    first_call_worst_case: float = 0.0
    """What a session's first call may cost at most: the counted prompt and the full output limit."""
    seconds: float = 0.0
    failure: StopReason | None = None
    """Why the call gave no answer (classified as a session's stop would be); None when it answered."""


def first_messages(agent: Any) -> list[dict]:
    """The system and task messages DefaultAgent.run opens every session with."""
    agent.extra_template_vars |= {"task": ""}
    return [
        agent.model.format_message(role=role, content=agent._render_template(template))
        for role, template in (
            ("system", agent.config.system_template),
            ("user", agent.config.instance_template),
        )
    ]


def classify(exc: BaseException, litellm: Any = None) -> StopReason:
    """infra_error for the provider's (or the sandbox's) failures, error for anything else."""
    name = exception_class(exc)
    infra = isinstance(exc, SandboxError)
    if litellm is not None and not infra:
        infra_classes = tuple(
            getattr(litellm.exceptions, n) for n in INFRA_EXCEPTIONS if hasattr(litellm.exceptions, n)
        )
        status = getattr(exc, "status_code", None)
        infra = isinstance(exc, infra_classes) or (
            isinstance(exc, litellm.exceptions.APIError) and (not isinstance(status, int) or status >= 500)
        )
    detail = first_line(exc)[:200]
    root = root_cause(exc)
    if root is not exc:  # what really happened: a refused or dropped connection, a timeout, bad JSON
        detail += f" (cause: {exception_class(root)}: {first_line(root)[:80]})"
    return StopReason(kind=StopKind.INFRA_ERROR if infra else StopKind.ERROR, exception_class=name, detail=detail)


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of `exc`'s chain (litellm wraps openai, which wraps httpx, ...)."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


class MiniSweRunner:
    """The default AgentRunner (see the module docstring)."""

    name = "mini-swe"

    def __init__(self, settings_path: Path | None = None):
        self.settings_path = settings_path
        self.settings = load_settings(settings_path)

    def _model_kwargs(self, settings: ModelSettings, limits: SessionLimits, session: str) -> dict[str, Any]:
        harness = {"max_tokens": limits.max_output_tokens, "timeout": limits.call_timeout_s, "max_retries": 0}
        kwargs = {**settings.extra_kwargs, **harness}
        if settings.api_base:
            kwargs["api_base"] = settings.api_base
        if settings.is_demo:
            from pytest_predbench.demo_server import SESSION_HEADER, shared_server
            from pytest_predbench.model_settings import demo_server_name

            litellm = _agent_stack().litellm
            server = shared_server(
                lambda model, messages, tools: litellm.token_counter(model=model, messages=messages, tools=tools)
            )
            assert settings.demo_script is not None
            name = server.add_script(demo_server_name(settings.model_id), settings.demo_script)
            api_base = server.api_base(name)  # a new conversation (a script that may refuse: its own port)
            kwargs.update(api_base=api_base, api_key=DEMO_API_KEY, extra_headers={SESSION_HEADER: session})
        return kwargs

    @staticmethod
    def _agent(model_obj: Any, environment: Any, trajectory: Path | None) -> Any:
        return _agent_stack().DefaultAgent(
            model_obj,
            environment,
            system_template=prompts.template("system.j2"),
            instance_template=prompts.template("instance.j2"),
            step_limit=model_obj.meter.limits.model_calls,
            cost_limit=0.0,  # the dollar ceiling is BudgetedModel's, checked before each call
            output_path=trajectory,
        )

    def probe(self, model: str, limits: SessionLimits) -> ProbeResult:
        """One call exactly as a session's first (prompt, tool, keyword arguments, timeout, dollar
        check, price), only with a short answer. UnknownModelError for an unpriced model; the
        provider's faults are the result's `failure`, never raised."""
        settings = resolve(model, self.settings)
        stack = _agent_stack()
        meter = Meter(settings, limits)
        result = ProbeResult(model=model, session_id=f"preflight-{uuid.uuid4().hex[:12]}")
        model_obj = None
        try:
            provider = stack.litellm.get_llm_provider(settings.call_name, api_base=settings.api_base)
            result.requested = provider[0]
            kwargs = self._model_kwargs(settings, limits, result.session_id)
            kwargs["max_tokens"] = min(limits.max_output_tokens, PROBE_OUTPUT_TOKENS)
            model_obj = stack.BudgetedModel(
                meter=meter, model_name=settings.call_name, model_kwargs=kwargs, litellm_model_registry=None
            )
            # the session's own environment class renders the prompt; the probe runs no command
            environment = stack.SandboxEnvironment(sandbox=None, spool=None, meter=meter)
            agent = self._agent(model_obj, environment, None)
            try:
                model_obj.query(first_messages(agent))
            except stack.FormatError:
                pass  # an answer without a tool call is still an answer
            finally:
                result.prompt_tokens_counted = model_obj.last_prompt_tokens
                worst = meter.price(model_obj.last_prompt_tokens, limits.max_output_tokens)
                result.first_call_worst_case = worst
        except stack.LimitsExceeded as exc:
            extra = exc.messages[0].get("extra", {}) if exc.messages else {}
            kind = EXIT_STATUS_STOPS.get(str(extra.get("exit_status")), StopKind.STEP_LIMIT)
            result.failure = StopReason(kind=kind, detail=str(exc.messages[0].get("content", ""))[:300])
        except Exception as exc:
            result.failure = classify(exc, stack.litellm)
        response = model_obj.last_response if model_obj is not None and result.failure is None else None
        if response is not None:
            hidden = getattr(response, "_hidden_params", None) or {}
            result.answered_as = hidden.get("provider_response_model") or getattr(response, "model", None)
            usage = getattr(response, "usage", None)
            result.prompt_tokens = getattr(usage, "prompt_tokens", None)
            result.completion_tokens = getattr(usage, "completion_tokens", None)
        result.dollars = meter.accounting.dollars
        result.seconds = round(meter.elapsed(), 3)
        return result

    def run(self, env: SessionEnv, model: str, limits: SessionLimits) -> SessionResult:
        settings = resolve(model, self.settings)  # UnknownModelError here: before any call
        stack = _agent_stack()
        meter = Meter(settings, limits)
        trajectory = trajectory_file(env)
        state = Path(tempfile.mkdtemp(prefix="predbench-session-"))
        spool = Spool(state / "spool")
        agent = None
        try:
            sandbox = Sandbox(
                pred_path=Path(env.pred_path),
                source_dir=Path(env.source_dir),
                scratch=Path(env.workdir),
                state_dir=state / "sandbox",
                tools={"submit-certificate": SUBMIT_SCRIPT},
                writable={SPOOL_DIR: spool.dir},
            )
            model_obj = stack.BudgetedModel(
                meter=meter,
                model_name=settings.call_name,
                model_kwargs=self._model_kwargs(settings, limits, env.session_id or uuid.uuid4().hex),
                litellm_model_registry=None,
            )
            agent = self._agent(
                model_obj, stack.SandboxEnvironment(sandbox=sandbox, spool=spool, meter=meter), trajectory
            )
            sandbox.run("true", timeout=30)  # a sandbox that cannot start fails here, before any spending
            exit_info = agent.run("")
            status = str(exit_info.get("exit_status", ""))
            kind = EXIT_STATUS_STOPS.get(status)
            stop = StopReason(kind=kind) if kind else StopReason(kind=StopKind.ERROR, detail=f"exit status {status!r}")
            stop.detail = stop.detail or str(agent.messages[-1].get("content", ""))[:300]
        except Exception as exc:  # the session ends; what ended it is recorded, never raised
            stop = classify(exc, stack.litellm)
        finally:
            shutil.rmtree(state, ignore_errors=True)
        meter.accounting.wall_seconds = round(meter.elapsed(), 3)
        result = SessionResult(
            runner=self.name,
            model=model,
            certificates=list(spool.accepted),
            rejected_submissions=spool.refused,
            accounting=meter.accounting,
            stop=stop,
            trajectory_path=str(trajectory),
            prompt_hash=prompts.prompt_hash(),
        )
        if agent is not None:
            agent.save(trajectory, {"info": {"predbench": result.model_dump(mode="json")}})
        return result


def _main(argv: list[str] | None = None) -> int:
    """Run one session and print its SessionResult as JSON (a tool for trying the runner by hand)."""
    from pytest_predbench.environment import PredEnvironmentError, checked_record

    parser = argparse.ArgumentParser(prog="python -m pytest_predbench.miniswe_runner", description=_main.__doc__)
    parser.add_argument("--model", default="demo/finder")
    parser.add_argument("--out", type=Path, required=True, help="directory for scratch, trajectory and certificates")
    parser.add_argument("--settings", type=Path, default=None, help="a model-settings TOML file")
    parser.add_argument("--dollars", type=float, default=None, help="override the session's dollar limit")
    args = parser.parse_args(argv)
    try:
        record = checked_record()
        runner = MiniSweRunner(args.settings)
    except (PredEnvironmentError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    limits = SessionLimits() if args.dollars is None else SessionLimits(dollars=args.dollars)
    out = args.out.resolve()
    env = SessionEnv(
        pred_path=record.pred_path,
        source_dir=record.source_dir,
        workdir=str(out / "scratch"),
        trajectory_path=str(out / "trajectory.json"),
        session_id=f"cli-{uuid.uuid4().hex[:8]}",
    )
    try:
        result = runner.run(env, args.model, limits)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for number, certificate in enumerate(result.certificates, 1):
        (out / f"certificate-{number}.json").write_text(certificate.model_dump_json(indent=2, exclude_none=True) + "\n")
    (out / "result.json").write_text(result.model_dump_json(indent=2) + "\n")
    print(result.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
