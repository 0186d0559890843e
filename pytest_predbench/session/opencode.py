"""OpenCodeRunner: one bug-hunting session with the installed agent opencode, behind AgentRunner.

The whole opencode process runs inside the session's sandbox (sandbox.py), the same one a
mini-swe-agent session's commands run in: the same /scratch, library source copy, pred gateway,
submission channel and kernel bounds. opencode's own bash tool runs its commands there; nothing
of it runs in the harness. Its configuration and state live in the session's own directory
(AGENT_DIR, on the session's bounded disk; HOME and every XDG_* point there).

It reaches its model only through the harness: the sandbox has no network; the metered endpoint
(endpoint.py) is a Unix socket bound in, relayed from loopback by a forwarder inside the
sandbox's network namespace. Each request is made here through litellm with the provider's key,
which never enters the sandbox, and booked as a mini-swe-agent call is (agent.Meter: the worst
case reserved before the call, refused past the ceiling, settled from the provider's usage,
counted against the model-call limit). opencode's title request is a model call like any other.

The task is the prompt every agent gets (prompts/system.j2 and instance.j2, rendered with the
same values as a mini-swe-agent session's, handed to `opencode run` as its message); opencode's
own system prompt is its own. Certificates go through `submit-certificate`, as for every agent.
"""

import json
import random
import shlex
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import jinja2

from pytest_predbench.files import write_text_atomic
from pytest_predbench.session import bwrap, model_settings, opencode_install, prompts
from pytest_predbench.session.chat_request import NotText, forwarded
from pytest_predbench.session.endpoint import Endpoint, Handler, Refused
from pytest_predbench.session.miniswe import MiniSweRunner, SessionParts, _agent_stack, classify
from pytest_predbench.session.model_settings import ModelSettings
from pytest_predbench.session.progress import report_progress
from pytest_predbench.session.protocol import (
    SessionEnv,
    SessionLimits,
    SessionResult,
    StopKind,
    StopReason,
    exception_class,
)
from pytest_predbench.session.retries import Backoff, Retried
from pytest_predbench.session.sandbox import Sandbox, first_shell
from pytest_predbench.session.submission import Spool, channel_sandbox

AGENT_DIR = "/predbench/agent"
"""The agent's own writable directory (HOME, XDG_*, its config, its event log)."""
OPENCODE_DIR = "/predbench/opencode"
"""The installed opencode, bound read-only."""
MODEL_DIR = "/predbench/model"
"""The metered endpoint's socket (read-only bind: connect, not replace)."""
FORWARDER = "predbench-model-forwarder"
FORWARDER_SCRIPT = Path(__file__).resolve().parent / "client" / "predbench_model_forwarder.py"
PORT = 4141
"""The forwarder's loopback port, inside the sandbox's own network namespace."""
PROVIDER = "predbench"
MODEL_ALIAS = "model"
"""What opencode calls the model (`predbench/model`); which model it is, only the harness knows."""
ENDPOINT_KEY = "predbench-endpoint"
"""opencode's config wants a key; this is no provider's (the harness holds the real one)."""
AGENT_SHELL = first_shell(f"ulimit -f {bwrap.FILE_SIZE_BYTES // 1024} && ulimit -c 0 || exit 126")
"""The first shell of an opencode session: the per-process limits without an address-space limit
(`ulimit -v`), under which opencode's JavaScript engine, reserving far more address space than it
uses, aborts; the memory of the session's processes together stays bounded by the kernel (bounds.py)."""


def opencode_config(limits: SessionLimits) -> dict:
    """opencode.json: one provider, the endpoint; bash and edit allowed (inside the sandbox), and so
    is a path outside the working directory (`external_directory`: the library source at /src, which
    the task asks it to read; opencode's default asks, and a non-interactive run takes that for a
    refusal and ends the session — the sandbox, not opencode, bounds what it may touch), web fetch
    denied (no network anyway), no sharing, no updates."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": PROVIDER,
                "options": {"baseURL": f"http://127.0.0.1:{PORT}/v1", "apiKey": ENDPOINT_KEY},
                "models": {
                    MODEL_ALIAS: {"name": MODEL_ALIAS, "limit": {"context": 200000, "output": limits.max_output_tokens}}
                },
            }
        },
        "model": f"{PROVIDER}/{MODEL_ALIAS}",
        "small_model": f"{PROVIDER}/{MODEL_ALIAS}",
        "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow", "webfetch": "deny"},
    }


def agent_environment() -> dict[str, str]:
    """opencode's environment inside the sandbox: its config and state in AGENT_DIR only."""
    return {
        "HOME": AGENT_DIR,
        "XDG_CONFIG_HOME": f"{AGENT_DIR}/config",
        "XDG_DATA_HOME": f"{AGENT_DIR}/data",
        "XDG_STATE_HOME": f"{AGENT_DIR}/state",
        "XDG_CACHE_HOME": f"{AGENT_DIR}/cache",
        "OPENCODE_CONFIG": f"{AGENT_DIR}/opencode.json",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    }


def task_text(environment: Any) -> str:
    """The task every agent gets: the session prompt's two templates, rendered with the values a
    mini-swe-agent session renders them with."""
    values = environment.get_template_vars(task="", step_limit=environment.meter.limits.model_calls)
    render = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return "\n\n".join(render.from_string(prompts.template(name)).render(**values) for name in prompts.TEMPLATE_NAMES)


BINARY = f"{OPENCODE_DIR}/bin/opencode"
START_FORWARDER = f"{FORWARDER} {PORT} {MODEL_DIR}/socket"
"""The forwarder, listening before this returns (what the agent's requests go through)."""


def as_agent(command: str) -> str:
    """`command` run with the agent's environment (agent_environment) over the sandbox's."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in agent_environment().items())
    return f"env {exports} {command}"


def session_command(task_file: str, events_file: str) -> str:
    """The one command the sandbox runs: the forwarder, then opencode with the task."""
    run = as_agent(f'{BINARY} run --format json -m {PROVIDER}/{MODEL_ALIAS} "$(cat {task_file})"')
    return f"{START_FORWARDER} && cd /scratch && {run} > {events_file}"


class AgentSandbox(NamedTuple):
    sandbox: Sandbox
    spool: Spool
    endpoint: Endpoint
    agent_dir: Path
    """The host directory behind AGENT_DIR (opencode.json written there)."""

    def close(self) -> None:
        self.endpoint.close()
        self.sandbox.close()


def agent_sandbox(
    *,
    pred_path: Path,
    source_dir: Path,
    extractor_path: Path | None,
    state_dir: Path,
    limits: SessionLimits,
    binary: Path,
    handler: Handler,
    snapshots: str = "",
) -> AgentSandbox:
    """An opencode session's sandbox (a session's channel_sandbox, with the forwarder, the agent's
    directory, the installed binary and the metered endpoint serving `handler`), its config written.
    Every opencode session builds it here, and so does the preflight's agent gate (run/agent_gate.py):
    what the gate checks is what a session gets. The caller closes it."""
    sandbox, spool = channel_sandbox(
        pred_path=pred_path,
        extractor_path=extractor_path,
        source_dir=source_dir,
        state_dir=state_dir,
        tools={FORWARDER: FORWARDER_SCRIPT.read_text(encoding="utf-8")},
        writable=(AGENT_DIR,),
        limits=limits,
        snapshots=snapshots,
    )
    try:
        socket_dir = sandbox.disk / ".model"
        endpoint = Endpoint(socket_dir / "socket", handler)
    except BaseException:
        sandbox.close()
        raise
    sandbox.read_only[MODEL_DIR] = socket_dir
    sandbox.read_only[OPENCODE_DIR] = binary.parent.parent
    agent_dir = sandbox.writable_dir(AGENT_DIR)
    (agent_dir / "opencode.json").write_text(json.dumps(opencode_config(limits), indent=2) + "\n")
    return AgentSandbox(sandbox, spool, endpoint, agent_dir)


HEALTH_PROBE = [{"role": "user", "content": "Reply with the single word OK."}]
"""The harness's own request after an agent's call failed (MeteredCalls._probed)."""
PROBE_OUTPUT_TOKENS = 16


def request_shaped(exc: BaseException, litellm: Any) -> bool:
    """Whether a provider failure can be the request's doing rather than the provider's load: an
    internal error (500) or an answer that cannot be parsed. A timeout, a rate limit, an overloaded or
    unavailable provider, a dropped connection depend on load and size, so they stay infrastructure
    whatever a probe shows (a small request may pass where a large one does not)."""
    status = getattr(exc, "status_code", None)
    shaped = tuple(getattr(litellm.exceptions, n) for n in ("InternalServerError", "APIResponseValidationError"))
    load = tuple(
        getattr(litellm.exceptions, n)
        for n in ("Timeout", "RateLimitError", "ServiceUnavailableError", "APIConnectionError")
    )
    return isinstance(exc, shaped) and not isinstance(exc, load) and status in (None, 500)


class MeteredCalls:
    """The harness's side of every model call the agent makes: one at a time, booked by the
    session's Meter, recorded in the trajectory. `stop` is set by the first refusal or provider
    failure (the session ends; later requests are refused). The books (the meter, `closed`) are
    touched only under `books`, never during a call, so the session's end (`settle`) does not wait
    for a call in flight and a call that ends after it books nothing."""

    def __init__(self, *, stack: Any, meter: Any, settings: ModelSettings, kwargs: dict, seed: str):
        self.stack = stack
        self.meter = meter
        self.settings = settings
        self.kwargs = kwargs
        self.backoff = Backoff()
        self.rng = random.Random(seed)
        self.cache_marks = meter.limits.prompt_cache and model_settings.uses_cache_breakpoints(settings)
        """Mark the prompt for the provider's cache where it needs marks (as mini-swe-agent's calls do)."""
        self.lock = threading.Lock()
        """One call at a time."""
        self.books = threading.Lock()
        self.closed = False
        """The session's books are kept: no call is made or booked any more."""
        self.stop: StopReason | None = None
        self.told = ""
        """Why the session ended, as the agent is told it (never the provider's own line)."""
        self.calls: list[dict] = []
        """Every request (the messages it added to the conversation) and its reply or refusal."""
        self.last_messages: list[dict] = []

    def _refuse(self, kind: StopKind, reason: str) -> Refused:
        if self.stop is None:
            self.stop = StopReason(kind=kind, detail=reason[:300])
            self.told = reason[:300]
        self.calls.append({"refused": reason})
        return Refused(f"predbench: {reason}")

    def __call__(self, body: dict) -> dict:
        try:
            request = forwarded(body)
        except NotText as exc:  # refused before anything reads it; the session goes on
            raise Refused(f"predbench: {exc}"[:300]) from None
        with self.lock:
            return self._call(request)

    def settle(self) -> float:
        """The session is over (its sandbox has ended): later requests are refused, and a call still
        in flight, which the provider may answer and bill after the books are kept, is booked now at
        its worst case (what was reserved for it; unanswered, so not a model call). Returns that."""
        with self.books:
            if self.closed:
                return 0.0
            self.closed = True
            worst = self.meter.interrupted()
            if worst:
                self.calls.append({"in_flight_at_end": True, "cost": worst})
            return worst

    def close(self) -> None:
        """No call is made or booked any more, and a call in flight is left to the caller (an
        interrupt books it at its worst case: SessionParts.interrupted_stop)."""
        with self.books:
            self.closed = True

    def _ended(self) -> Refused:
        return Refused("predbench: the session has ended")

    def _call(self, request: dict) -> dict:
        m, litellm = self.meter, self.stack.litellm
        with self.books:
            if self.closed:
                raise self._ended()
            if self.stop is not None:
                raise Refused(f"predbench: the session has ended ({self.stop.kind}: {self.told})")
            if m.elapsed() >= m.limits.wall_seconds:
                raise self._refuse(StopKind.TIME_LIMIT, f"wall time of {m.limits.wall_seconds:.0f}s used up")
            if m.accounting.model_calls >= m.limits.model_calls:
                raise self._refuse(StopKind.STEP_LIMIT, f"the limit of {m.limits.model_calls} model calls is used up")
        messages = request["messages"]
        if self.cache_marks:
            request = {**request, "messages": self.stack.cache_marked(messages)}
        try:
            prompt = self._prompt_tokens(messages, request.get("tools"))
        except Exception as exc:  # the agent's request cannot even be counted: not made
            raise self._refuse(StopKind.ERROR, f"the request cannot be counted: {exc}"[:200]) from None
        with self.books:
            if self.closed:
                raise self._ended()
            refusal = m.reserve(prompt)
            if refusal:
                raise self._refuse(StopKind.COST_LIMIT, refusal)
        done = Retried()
        try:
            call = lambda: litellm.completion(model=self.settings.call_name, **request, **self.kwargs)  # noqa: E731
            response = m.retried(call, backoff=self.backoff, rng=self.rng, done=done)
        except Exception as exc:
            with self.books:
                if self.closed:  # booked at its worst case when the session ended
                    raise self._ended() from None
                m.in_flight = False  # the provider failed: nothing answered, nothing billed
                stop = classify(exc, litellm)
                self.calls.append({"failed": stop.detail})
            if stop.is_infra and request_shaped(exc, litellm):
                stop = self._probed(stop)
            with self.books:
                if self.stop is None and not self.closed:  # once the books are kept, the session's stop is too
                    self.stop, self.told = stop, f"the model call failed ({stop.exception_class})"
            # its class only: the provider's line names what the harness called (a URL, a proxy)
            raise Refused(f"predbench: the model call failed ({stop.exception_class})", status=502) from None
        with self.books:
            if self.closed:  # booked at its worst case when the session ended
                raise self._ended()
            cost = m.charge(response)
            answer = response.model_dump() | {"model": f"{PROVIDER}/{MODEL_ALIAS}"}  # which model: the harness's
            self._record(messages, answer, prompt, cost)
        report_progress(m.progress_path, m.accounting, m.accounting.model_calls, m.elapsed())
        return answer

    def _prompt_tokens(self, messages: list[dict], tools: list[dict] | None) -> int:
        """The prompt's tokens as the reservation counts them: litellm's count, or the whole request's
        JSON counted as text, whichever is more. The agent's code chooses the request, and litellm's
        count leaves parts of it out (the schema of a tool whose `parameters` has no `properties`:
        100,505 tokens counted as 33; the ids and names of an assistant's tool calls): a call could pass
        the cap's check that its cost then crosses."""
        litellm, model = self.stack.litellm, self.settings.call_name
        counted = litellm.token_counter(model=model, messages=messages, tools=tools)
        as_text = litellm.token_counter(model=model, text=json.dumps({"messages": messages, "tools": tools}))
        return max(counted, as_text)

    def _probed(self, stop: StopReason) -> StopReason:
        """After a request-shaped failure (request_shaped) that outlasted the retries: the harness asks
        the provider its own smallest request once (a few output tokens, reserved and booked like any
        call). An installed agent's code can send any request it likes; the same request failing every
        attempt while the provider answers this one is the request's doing, so the session's own result
        (error), not an outage. No answer: an outage, infra. No room for it under the cap, or no time
        left for it: the session's money or time is used up, its own result too."""
        m, litellm = self.meter, self.stack.litellm
        own = f"the agent's own request (the provider answered the harness's probe right after): {stop.detail}"
        if m.elapsed() + m.limits.call_timeout_s >= m.limits.wall_seconds:
            return StopReason(kind=StopKind.TIME_LIMIT, detail=f"no time left to tell a failure apart: {stop.detail}")
        try:
            prompt = litellm.token_counter(model=self.settings.call_name, messages=HEALTH_PROBE)
        except Exception:  # noqa: BLE001 - no probe: the failure stays what it was
            return stop
        with self.books:
            if self.closed:
                return stop
            if m.reserve(prompt, output_tokens=PROBE_OUTPUT_TOKENS):
                return StopReason(
                    kind=StopKind.COST_LIMIT, detail=f"no money left to tell a failure apart: {stop.detail}"
                )
        kwargs = {**self.kwargs, "max_tokens": PROBE_OUTPUT_TOKENS}
        try:
            response = litellm.completion(model=self.settings.call_name, messages=HEALTH_PROBE, **kwargs)
        except Exception:  # noqa: BLE001 - the provider fails the harness too: an outage
            with self.books:
                if not self.closed:
                    m.in_flight = False
            return stop
        with self.books:
            if self.closed:
                return stop
            cost = m.charge(response)
            self.calls.append({"health_probe": True, "usage": response.model_dump().get("usage"), "cost": cost})
        return StopReason(kind=StopKind.ERROR, exception_class=stop.exception_class, detail=own)

    def _record(self, messages: list[dict], answer: dict, counted: int, cost: float) -> None:
        shared = 0
        for old, new in zip(self.last_messages, messages, strict=False):
            if old != new:
                break
            shared += 1
        self.last_messages = messages
        reply = ((answer.get("choices") or [{}])[0]).get("message") or {}
        self.calls.append(
            {
                "kept_messages": shared,
                "added_messages": messages[shared:],
                "reply": reply,
                "usage": answer.get("usage"),
                "prompt_tokens_counted": counted,
                "cost": cost,
            }
        )

    def conversation(self) -> list[dict]:
        """The agent's conversation as mini-swe-agent's trajectory keeps one: the last request's
        messages and its reply, each bash call's command in `extra.actions` (report/trajectory.py)."""
        replies = [c for c in self.calls if "reply" in c]
        messages = [dict(m) for m in self.last_messages] + ([dict(replies[-1]["reply"])] if replies else [])
        for message in messages:
            calls = message.get("tool_calls") or []
            commands = []
            for call in calls:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except (TypeError, ValueError):
                    arguments = {}
                if function.get("name") == "bash" and isinstance(arguments, dict):
                    commands.append({"command": str(arguments.get("command", ""))})
            if commands:
                message["extra"] = {"actions": commands}
        return messages


class OpenCodeRunner(MiniSweRunner):
    """The opencode AgentRunner (see the module docstring). Its model settings, call arguments and
    preflight probe are mini-swe-agent's (the same litellm call); the loop is opencode's."""

    name = "opencode"
    version = opencode_install.VERSION

    def _parts(self, env: SessionEnv) -> "_State":
        return _State(Path(env.trajectory_path), env.pred_version)

    def _drive(self, state: "_State", env: SessionEnv, settings: ModelSettings, limits: SessionLimits) -> StopReason:
        """opencode run to its stop, in the session sandbox (a KeyboardInterrupt propagates, `state`
        holding what ran); MiniSweRunner.run turns it into the session's result."""
        host_state = Path(tempfile.mkdtemp(prefix="predbench-opencode-"))
        built = None
        try:
            binary = opencode_install.ensure()
            stack = _agent_stack()
            state.meter = stack.Meter(settings, limits)
            state.meter.progress_path = env.progress_path
            session = env.session_id or uuid.uuid4().hex
            kwargs = self._model_kwargs(settings, limits, session)
            state.calls = MeteredCalls(stack=stack, meter=state.meter, settings=settings, kwargs=kwargs, seed=session)
            built = agent_sandbox(
                pred_path=Path(env.pred_path),
                extractor_path=Path(env.extractor_path) if env.extractor_path else None,
                source_dir=Path(env.source_dir),
                state_dir=host_state,
                limits=limits,
                binary=binary,
                handler=state.calls,
                snapshots=env.instances_dir,
            )
            sandbox, state.spool, agent_dir = built.sandbox, built.spool, built.agent_dir
            environment = stack.SandboxEnvironment(
                sandbox=sandbox, spool=state.spool, meter=state.meter, pred_version=env.pred_version
            )
            (agent_dir / "task.md").write_text(task_text(environment))
            sandbox.set_pred_quota(limits.pred_calls)
            allowed = max(1.0, limits.wall_seconds - state.meter.elapsed())
            ran = sandbox.run(
                session_command(f"{AGENT_DIR}/task.md", f"{AGENT_DIR}/events.jsonl"), timeout=allowed, shell=AGENT_SHELL
            )
            state.calls.settle()  # the sandbox has ended: a call still in flight is booked before anything is read
            state.events = _read_events(agent_dir / "events.jsonl")
            state.output = ran.output
            pred = sandbox.take_pred_usage()
            state.meter.accounting.pred_calls += pred.calls
            state.meter.accounting.shell_actions += sum(1 for e in state.events if _is_bash(e))
            state.receipts = [receipt.message() for receipt in state.spool.collect()]
            if state.calls.stop is not None:
                return state.calls.stop
            if ran.timed_out:
                return StopReason(kind=StopKind.TIME_LIMIT, detail=f"wall time of {limits.wall_seconds:.0f}s used up")
            if pred.refused:
                return StopReason(
                    kind=StopKind.PRED_LIMIT, detail=f"the limit of {limits.pred_calls} pred calls is used up"
                )
            if ran.returncode != 0:
                tail = ran.output.strip().splitlines()[-1:] or [""]
                return StopReason(kind=StopKind.ERROR, detail=f"opencode exited {ran.returncode}: {tail[0][:200]}")
            submitted = len(state.spool.accepted)
            return StopReason(
                kind=StopKind.FINISHED, detail=f"the agent finished with {submitted} certificate(s) submitted"
            )
        except opencode_install.OpenCodeInstallError as exc:  # predbench's fault, not the model's
            return StopReason(kind=StopKind.INFRA_ERROR, exception_class=exception_class(exc), detail=str(exc)[:300])
        except Exception as exc:  # the session ends; what ended it is recorded, never raised
            return classify(exc, getattr(_loaded_stack(), "litellm", None))
        except KeyboardInterrupt:  # the interrupt books a call in flight (SessionParts.interrupted_stop)
            if state.calls is not None:
                state.calls.close()
            raise
        finally:
            if state.calls is not None:  # however the session ended, before its books are read
                state.calls.settle()
            if built is not None:
                state.pred_log = built.sandbox.take_pred_log()
                built.close()
            shutil.rmtree(host_state, ignore_errors=True)


def _loaded_stack() -> Any:
    import sys

    return sys.modules.get("pytest_predbench.session.agent")


def _read_events(path: Path, limit: int = 4 * 1024 * 1024) -> list[dict]:
    """opencode's event log (written inside the sandbox: informative, never trusted for the books)."""
    try:
        with path.open("rb") as f:
            raw = f.read(limit)
    except OSError:
        return []
    events = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _is_bash(event: dict) -> bool:
    part = event.get("part") if isinstance(event.get("part"), dict) else {}
    return event.get("type") == "tool_use" and part.get("tool") == "bash"


class _State(SessionParts):
    """What an opencode session has built so far: a mini-swe session's parts (spend, spool,
    trajectory, pred log: their stop and result read alike), and opencode's calls and events."""

    def __init__(self, trajectory: Path, pred_version: str):
        super().__init__(trajectory, pred_version)
        self.calls: MeteredCalls | None = None
        self.events: list[dict] = []
        self.output = ""
        self.receipts: list[str] = []

    def save(self, result: SessionResult) -> None:
        """The trajectory: the conversation, every metered call, opencode's events, the result."""
        calls = self.calls
        data = {
            "info": {
                "predbench": result.model_dump(mode="json"),
                "agent": {"name": "opencode", "version": opencode_install.VERSION},
                "receipts": self.receipts,
                "output_tail": self.output[-4000:],
            },
            "messages": calls.conversation() if calls is not None else [],
            "model_calls": calls.calls if calls is not None else [],
            "events": self.events,
        }
        write_text_atomic(self.trajectory, json.dumps(_redacted(data), indent=2) + "\n")


def _redacted(data: Any) -> Any:
    """Keys never reach the trajectory (the harness's call arguments are not in it; this is a belt)."""
    stack = _loaded_stack()
    return stack.redact(data) if stack is not None else data
