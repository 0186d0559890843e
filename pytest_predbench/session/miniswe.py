"""MiniSweRunner: one bug-hunting session with mini-swe-agent's DefaultAgent and litellm.

Importing it (to plan, to validate --models, to report) costs nothing: the agent stack
(session/agent.py, the only module that imports mini-swe-agent and litellm) is imported when a
session or a probe first runs.

What predbench adds to the stock agent, every piece the same for every model:
- its own prompt (prompts/*.j2, hashed into the result) and the `bash` tool;
- a bubblewrap sandbox for every command (sandbox.py), bounded observations, and the
  `submit-certificate` channel (submission.py) — the only way a certificate counts;
- limits enforced here, not by the model: dollars as a hard ceiling (before each call its
  worst case — litellm's count of the prompt plus the maximum output, at the model's highest
  rates — must still fit), model calls, pred calls, wall time, and a timeout on every call;
  every observation ends with what is used of them;
- retries of a call after a transient provider error, within the session's wall time;
- prompt caching: cache-control marks for the providers that need them (mini-swe-agent's
  set_cache_control), nothing for those that cache a repeated prefix by themselves;
- accounting as litellm prices the provider's reported usage (cached and cache-written tokens
  included), and a stop reason that tells infrastructure failures (not results) from everything
  else; Ctrl-C or SIGTERM ends the session with its measured spend (SessionInterrupted).
"""

import argparse
import json
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from pytest_predbench.files import write_text_atomic
from pytest_predbench.session import model_settings, prompts
from pytest_predbench.session.model_settings import ModelSettings, load_settings, resolve
from pytest_predbench.session.pricing import Rates
from pytest_predbench.session.protocol import (
    Accounting,
    SessionEnv,
    SessionInterrupted,
    SessionLimits,
    SessionResult,
    StopKind,
    StopReason,
    exception_class,
    first_line,
    trajectory_file,
)
from pytest_predbench.session.retries import is_provider_failure
from pytest_predbench.session.sandbox import SandboxError
from pytest_predbench.session.submission import channel_sandbox

DEMO_API_KEY = "predbench-demo"
"""Any key will do for the demo server; real providers' keys come from their usual variables."""

EXIT_STATUS_STOPS = {
    "Submitted": StopKind.FINISHED,
    "LimitsExceeded": StopKind.STEP_LIMIT,
    "CostLimitExceeded": StopKind.COST_LIMIT,
    "PredLimitExceeded": StopKind.PRED_LIMIT,
    "TimeExceeded": StopKind.TIME_LIMIT,
    "RepeatedFormatError": StopKind.FORMAT_ERRORS,
}


def _agent_stack() -> ModuleType:
    """session/agent.py: mini-swe-agent and litellm, imported on first use (it takes seconds)."""
    from pytest_predbench.session import agent

    return agent


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
    missing_keys: list[str] = []
    """Environment variables litellm needs for this model and cannot find: then no call was made."""
    rates: Rates | None = None
    """The model's rates as the session will use them (for the preflight's estimate of a session)."""


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
    infra = isinstance(exc, SandboxError) or (litellm is not None and is_provider_failure(exc, litellm))
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
            if model_settings.needs_placeholder_key(settings):
                kwargs["api_key"] = model_settings.PLACEHOLDER_API_KEY
        if settings.is_demo:
            from pytest_predbench.session.demo.server import SESSION_HEADER, shared_server
            from pytest_predbench.session.model_settings import demo_server_name

            server = shared_server()
            assert settings.demo_script is not None
            name = server.add_script(demo_server_name(settings.model_id), settings.demo_script)
            api_base = server.api_base(name)  # a new conversation (a script that may refuse: its own port)
            kwargs.update(api_base=api_base, api_key=DEMO_API_KEY, extra_headers={SESSION_HEADER: session})
        return kwargs

    def _model(self, stack: ModuleType, meter: Any, settings: ModelSettings, kwargs: dict, seed: str) -> Any:
        """The session's model: litellm's, with the harness's ceiling, retries, cache marks and budget line."""
        marks = meter.limits.prompt_cache and model_settings.uses_cache_breakpoints(settings)
        return stack.BudgetedModel(
            meter=meter,
            seed=seed,
            model_name=settings.call_name,
            model_kwargs=kwargs,
            litellm_model_registry=None,
            set_cache_control="default_end" if marks else None,
            observation_template=stack.OBSERVATION_TEMPLATE,
        )

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

    def probe(self, model: str, limits: SessionLimits, pred_version: str) -> ProbeResult:
        """One call exactly as a session's first (prompt, tool, keyword arguments, timeout, dollar
        check, price), only with a short answer. UnknownModelError for an unpriced model; a missing
        API key is found before any call (`missing_keys`); the provider's faults are the result's
        `failure`, never raised."""
        settings = resolve(model, self.settings)
        stack = _agent_stack()
        meter = stack.Meter(settings, limits)
        result = ProbeResult(model=model, session_id=f"preflight-{uuid.uuid4().hex[:12]}", rates=meter.rates)
        result.missing_keys = model_settings.missing_api_keys(settings)
        if result.missing_keys:  # found without a call: the call could only fail, after seconds
            return result
        model_obj = None
        try:
            provider = stack.litellm.get_llm_provider(settings.call_name, api_base=settings.api_base)
            result.requested = provider[0]
            kwargs = self._model_kwargs(settings, limits, result.session_id)
            kwargs["max_tokens"] = min(limits.max_output_tokens, PROBE_OUTPUT_TOKENS)
            model_obj = self._model(stack, meter, settings, kwargs, result.session_id)
            # the session's own environment class renders the prompt; the probe runs no command
            environment = stack.SandboxEnvironment(sandbox=None, spool=None, meter=meter, pred_version=pred_version)
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
        """The session's result. Ctrl-C or SIGTERM (KeyboardInterrupt) in any phase — importing the
        agent stack, starting the sandbox, a model call in flight, a command running, saving — ends it
        with SessionInterrupted carrying what it spent by the runner's own running cost, and its
        trajectory so far is saved."""
        parts = self._parts(env)
        interrupted = False
        try:
            settings = resolve(model, self.settings)  # UnknownModelError here: before any call
            trajectory_file(env)
            stop = self._drive(parts, env, settings, limits)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into it by the harness: settle what was spent
            interrupted = True
            stop = parts.interrupted_stop()
        try:
            result = parts.result(self.name, model, stop)
            parts.save(result)
        except KeyboardInterrupt:  # while the result was kept: keep it all the same, now as interrupted
            interrupted = True
            stop = parts.interrupted_stop()
            result = parts.result(self.name, model, stop)
            parts.save(result)
        if interrupted:
            raise SessionInterrupted(result)
        return result

    def _parts(self, env: SessionEnv) -> "SessionParts":
        """What a session builds as it runs (an agent with more to keep extends it)."""
        return SessionParts(trajectory=Path(env.trajectory_path), pred_version=env.pred_version)

    def _drive(
        self, parts: "SessionParts", env: SessionEnv, settings: ModelSettings, limits: SessionLimits
    ) -> StopReason:
        """Run the agent to its stop (a KeyboardInterrupt propagates, `parts` holding what ran)."""
        state = Path(tempfile.mkdtemp(prefix="predbench-session-"))
        stack = sandbox = None
        try:
            stack = _agent_stack()
            parts.meter = stack.Meter(settings, limits)
            parts.meter.progress_path = env.progress_path
            sandbox, parts.spool = channel_sandbox(
                pred_path=Path(env.pred_path),
                extractor_path=Path(env.extractor_path) if env.extractor_path else None,
                source_dir=Path(env.source_dir),
                state_dir=state,
                limits=limits,
                snapshots=env.instances_dir,
            )
            session = env.session_id or uuid.uuid4().hex
            kwargs = self._model_kwargs(settings, limits, session)
            parts.model = self._model(stack, parts.meter, settings, kwargs, session)
            environment = stack.SandboxEnvironment(
                sandbox=sandbox, spool=parts.spool, meter=parts.meter, pred_version=env.pred_version
            )
            parts.agent = self._agent(parts.model, environment, parts.trajectory)
            sandbox.run("true", timeout=30)  # a sandbox that cannot start fails here, before any spending
            exit_info = parts.agent.run("")
            status = str(exit_info.get("exit_status", ""))
            kind = EXIT_STATUS_STOPS.get(status)
            stop = StopReason(kind=kind) if kind else StopReason(kind=StopKind.ERROR, detail=f"exit status {status!r}")
            stop.detail = stop.detail or str(parts.agent.messages[-1].get("content", ""))[:300]
        except Exception as exc:  # the session ends; what ended it is recorded, never raised
            stop = classify(exc, stack.litellm if stack is not None else None)
            retries = getattr(parts.model, "gave_up_after", None)
            if retries is not None and stop.is_infra:
                stop.detail = f"after {retries} retr{'y' if retries == 1 else 'ies'}: {stop.detail}"[:400]
        finally:
            if sandbox is not None:
                parts.pred_log = sandbox.take_pred_log()
                sandbox.close()
            shutil.rmtree(state, ignore_errors=True)
        return stop


class SessionParts:
    """What a session has built so far: whichever phase an interrupt ends it in, its spend and
    trajectory are read from here (an opencode session's state extends it: session/opencode.py)."""

    def __init__(self, trajectory: Path, pred_version: str):
        self.trajectory = trajectory
        self.pred_version = pred_version
        self.meter: Any = None
        """The running accounting (None until the agent stack is imported: nothing spent yet)."""
        self.spool: Any = None
        self.model: Any = None
        self.agent: Any = None
        self.pred_log: list = []
        """The gateway's record of every pred call, taken when the sandbox closes."""

    def interrupted_stop(self) -> StopReason:
        if self.meter is None:
            return StopReason(kind=StopKind.INTERRUPTED, detail="interrupted before the session's first model call")
        in_flight = self.meter.interrupted()
        calls = self.meter.accounting.model_calls
        detail = f"interrupted after {calls} answered model call(s)"
        if in_flight:
            detail += f" and one in flight, charged its worst case ${in_flight:.6f}"
        return StopReason(kind=StopKind.INTERRUPTED, detail=detail)

    def result(self, runner: str, model: str, stop: StopReason) -> SessionResult:
        accounting = self.meter.accounting if self.meter is not None else Accounting()
        if self.meter is not None:
            accounting.wall_seconds = round(self.meter.elapsed(), 3)
        return SessionResult(
            runner=runner,
            model=model,
            certificates=list(self.spool.accepted) if self.spool else [],
            rejected_submissions=self.spool.refused if self.spool else 0,
            accounting=accounting,
            stop=stop,
            trajectory_path=str(self.trajectory),
            prompt_hash=prompts.prompt_hash(self.pred_version),
            pred_log=self.pred_log,
        )

    def save(self, result: SessionResult) -> None:
        """The trajectory with the result in it: the agent's messages so far, or (before the agent
        existed) the result alone."""
        extra = {"info": {"predbench": result.model_dump(mode="json")}}
        if self.agent is not None:
            self.agent.save(self.trajectory, extra)
        else:
            write_text_atomic(self.trajectory, json.dumps({**extra, "messages": []}, indent=2) + "\n")


def _main(argv: list[str] | None = None) -> int:
    """Run one session and print its SessionResult as JSON (a tool for trying the runner by hand)."""
    from pytest_predbench.verify import pin
    from pytest_predbench.verify.environment import PredEnvironmentError, checked_record

    parser = argparse.ArgumentParser(prog="python -m pytest_predbench.session.miniswe", description=_main.__doc__)
    parser.add_argument("--model", default="demo/finder")
    parser.add_argument("--out", type=Path, required=True, help="directory for scratch, trajectory and certificates")
    parser.add_argument("--settings", type=Path, default=None, help="a model-settings TOML file")
    parser.add_argument("--dollars", type=float, default=None, help="override the session's dollar limit")
    parser.add_argument("--pred-version", default=pin.default_choice(), help="the pred version to stand on")
    args = parser.parse_args(argv)
    try:
        record = checked_record(pin.check_version(args.pred_version))
        runner = MiniSweRunner(args.settings)
    except (PredEnvironmentError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    limits = SessionLimits() if args.dollars is None else SessionLimits(dollars=args.dollars)
    out = args.out.resolve()
    env = SessionEnv(
        pred_version=record.pred_version,
        pred_path=record.pred_path,
        extractor_path=record.extractor_path,
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
        (out / f"certificate-{number}.json").write_text(certificate.file_text())
    (out / "result.json").write_text(result.model_dump_json(indent=2) + "\n")
    print(result.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
