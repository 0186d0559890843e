"""Preflight: the gates a run passes once, on the controller, before any item may spend.

A run whose first session would fail — pred rebuilt or replaced, the library source edited,
bubblewrap unable to start, a model that answers as another model, is not priced, or cannot
take the prompt — is stopped here, with one line per failed gate, instead of spending its
budget on sessions that were never comparable. The gates:

    pred      the recorded binary at the pinned version, with the recorded sha256
    source    the library source the agent reads still matches its manifest
    bounds    the kernel can bound a session's memory, processes and CPU (cgroups) and its disk (a
              size-limited tmpfs); where it cannot, the run stops unless told --unbounded
    sandbox   `pred --version` through the pred gateway, and the source, inside the agent's own sandbox
    agent X   an installed agent (opencode), in its session's sandbox: its binary at the pinned version,
              the metered endpoint reached from inside, no key the harness holds visible there
              (run/agent_gate.py); no call reaches a provider, nothing is spent
    model X   a baseline: its program starts in the sandbox (no call, no price). A model: first,
              without a call, the API key litellm needs for it is in the environment;
              then one completion through the session's real path (MiniSweRunner.probe) at the
              size of its first prompt: the provider answers, as exactly the model requested (no
              prefix or substring match), reports usage, and the call costs more than nothing. A
              session cap that affords fewer calls than the model-call limit at the model's price
              (estimated: session/pricing.py) passes with a WARNING naming the cap that would.

Only the models that will run are probed: on a resume, those with items left; none when nothing
is left to run.

A baseline (`baseline/...`, session/baseline.py) calls no model and has no price: its model gate is
its program starting in the sandbox, and the pred, source and sandbox gates apply to it as to any
session. The fake runner calls no model and uses no sandbox: for it only the pred gates apply, and
only when its plan verifies certificates. Nothing here imports litellm; the model gate reaches it
through MiniSweRunner, lazily.
"""

import math
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, computed_field

from pytest_predbench.files import CorruptStateError
from pytest_predbench.session.pricing import Rates, estimate_session
from pytest_predbench.session.protocol import SessionLimits, StopKind, first_line
from pytest_predbench.verify.environment import (
    EnvRecord,
    PredEnvironmentError,
    check_pred,
    check_source,
    load_record,
    pool_record,
)
from pytest_predbench.verify.pool import PoolError, load_pool

if TYPE_CHECKING:
    from pytest_predbench.session.sandbox import CommandResult
    from pytest_predbench.state.plan import Plan

PROMPT_ARRIVAL = 0.5
"""A provider that counts fewer than this share of the prompt tokens sent did not get the whole
prompt (a proxy truncating it, a context window too small): what it answered is not a session's
first call. Token counters of different vendors differ by a few percent, never by half."""


class GateStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    """Not checked because a gate it depends on failed; that failure already stops the run."""
    WARNING = "warning"
    """Passed, but the run may not go as planned (a session cap too small for the call limit)."""


class GateResult(BaseModel):
    gate: str
    status: GateStatus
    detail: str
    """One line: what was checked and found."""
    dollars: float = 0.0
    """What the gate spent (a model's probe call)."""

    @property
    def line(self) -> str:
        return f"preflight {self.gate}: {self.status.value.upper()}: {self.detail}"


def _passed(gate: str, detail: str, dollars: float = 0.0) -> GateResult:
    return GateResult(gate=gate, status=GateStatus.PASSED, detail=detail, dollars=dollars)


def _failed(gate: str, detail: str, dollars: float = 0.0) -> GateResult:
    return GateResult(gate=gate, status=GateStatus.FAILED, detail=detail, dollars=dollars)


def _first_line(exc: BaseException) -> str:
    return first_line(exc) or type(exc).__name__


# -- pred, its source, the sandbox ---------------------------------------------------------


def pred_gate(
    version: str, bug_pool: str | None = None, record_path: Path | None = None
) -> tuple[GateResult, EnvRecord | None]:
    """The record at `record_path`, else the bug pool's minted build, else the version's own,
    checked against its binaries."""
    try:
        minted = load_pool(bug_pool) if bug_pool is not None and record_path is None else None
        record = pool_record(minted) if minted else load_record(version, record_path)
        check_pred(record)
    except (PredEnvironmentError, CorruptStateError, PoolError, OSError, RuntimeError) as exc:
        return _failed("pred", _first_line(exc)), None
    detail = f"pred {record.pred_version} at {record.pred_path}, sha256 {record.pred_sha256[:12]}"
    if minted:
        detail += f": the minted build of {minted.label()}"
    return _passed("pred", detail), record


def source_gate(record: EnvRecord) -> GateResult:
    try:
        check_source(record)
    except (PredEnvironmentError, OSError) as exc:
        return _failed("source", _first_line(exc))
    files = len(record.source_manifest)
    return _passed("source", f"{record.source_dir}: {files} files match the manifest {record.source_sha256[:12]}")


SANDBOX_PROBE = (
    "pred --version && ls /src/problemreductions/src/rules | grep -c '[.]rs$' && command -v pred-extract "
    "&& command -v submit-certificate && test -w /predbench/spool && test -w /scratch"
)
"""pred runs, the rules are readable, the extractor is there, and the submission channel and the scratch
are usable."""


def in_sandbox(
    record: EnvRecord,
    command: str,
    bwrap: str = "bwrap",
    tools: dict[str, str] | None = None,
    limits: SessionLimits | None = None,
) -> "CommandResult | str":
    """`command`'s CommandResult in a session's sandbox, built as a session builds it (tools, spool,
    scratch); the one-line reason when the sandbox does not start."""
    from pytest_predbench.session.sandbox import SandboxError
    from pytest_predbench.session.submission import channel_sandbox

    with tempfile.TemporaryDirectory(prefix="predbench-preflight-") as tmp:
        try:
            sandbox, _ = channel_sandbox(
                pred_path=Path(record.pred_path),
                extractor_path=Path(record.extractor_path),
                source_dir=Path(record.source_dir),
                state_dir=Path(tmp) / "state",
                tools=tools,
                limits=limits,
                bwrap=bwrap,
            )
        except (SandboxError, OSError) as exc:
            return _first_line(exc)
        try:
            return sandbox.run(command, timeout=30)
        except (SandboxError, OSError) as exc:
            return _first_line(exc)
        finally:
            sandbox.close()


def bounds_gate(limits: SessionLimits) -> GateResult:
    """The session's memory, processes, CPU and disk are bounded by the kernel (session/bounds.py); a
    bound this machine cannot enforce stops the run, unless it was told to go unbounded."""
    from pytest_predbench.session.bounds import enforceable

    found = enforceable()
    wanted = f"memory {limits.memory_mib} MiB, {limits.processes} processes, disk {limits.disk_mib} MiB"
    if limits.cpu_cores == 0:  # told not to bound the CPU
        found.enforced.pop("cpu", None)
        found.unenforced.pop("cpu", None)
    else:
        cores = "the machine's cores / the workers, at least 1" if limits.cpu_cores is None else limits.cpu_cores
        wanted += f", cpu {cores:g} cores" if isinstance(cores, float) else f", cpu: {cores}"
    if not found.unenforced:
        how = "; ".join(f"{bound} by {how}" for bound, how in found.enforced.items())
        return _passed("bounds", f"every session: {wanted}, enforced by the kernel ({how})")
    missing = f"this machine cannot enforce {', '.join(found.unenforced)} ({found.missing_line()})"
    if limits.unbounded:
        return GateResult(gate="bounds", status=GateStatus.WARNING, detail=f"{missing}; running unbounded as told")
    return _failed("bounds", f"{missing}; run as root with cgroups, or give --unbounded to run without them")


def sandbox_gate(record: EnvRecord, bwrap: str = "bwrap", limits: SessionLimits | None = None) -> GateResult:
    """The agent's sandbox, as a session builds it (tools, spool, scratch, gateway, bounds), must
    start and reach pred through the gateway, the source and the submission channel."""
    result = in_sandbox(record, SANDBOX_PROBE, bwrap, limits=limits)
    if isinstance(result, str):
        return _failed("sandbox", f"the agent's sandbox does not start: {result}")
    lines = result.output.split("\n")
    expected = f"pred {record.pred_version}"
    if result.returncode != 0 or lines[0].strip() != expected:
        shown = " | ".join(line.strip() for line in lines if line.strip())[:200]
        return _failed(
            "sandbox",
            f"inside the sandbox `{SANDBOX_PROBE}` exited {result.returncode}: {shown or 'no output'}",
        )
    rules = lines[1].strip()
    readable = f"its {rules} rule source files (src/rules/*.rs) are readable"
    return _passed("sandbox", f"bubblewrap starts; inside it {expected} runs through the gateway and {readable}")


# -- models --------------------------------------------------------------------------------


def budget_that_passes(session_dollars: float, sessions: int, models: int, what: str) -> str:
    """The command-line budgets a refusal for money names: the session cap that is enough (rounded up
    to the cent) and the --budget that gives it to every planned session of every paying model."""
    need = math.ceil(session_dollars * 100 - 1e-9) / 100
    of = f" of {models} model(s)" if models > 1 else ""
    return f"--session-budget {need:g} {what} (--budget {need * sessions * models:g} for {sessions} session(s){of})"


def cap_warning(
    rates: Rates | None, first_prompt: int, limits: SessionLimits, sessions: int, models: int = 1
) -> str | None:
    """Why the session cap is too small for the model-call limit at this model's price, or None."""
    if rates is None or first_prompt <= 0:
        return None
    estimate = estimate_session(rates, first_prompt, limits.max_output_tokens, limits.dollars, limits.model_calls)
    if estimate.calls >= limits.model_calls:
        return None
    return (
        f"the ${limits.dollars:g} session cap affords about {estimate.calls} of the {limits.model_calls} model calls "
        f"at this model's price (estimated); "
        + budget_that_passes(estimate.budget_for_limit, sessions, models, "would afford them all")
    )


def model_gate(
    runner,  # noqa: ANN001 - a MiniSweRunner, imported only when a real model runs
    model: str,
    limits: SessionLimits,
    sessions: int = 1,
    models: int = 1,
    *,
    version: str,
) -> GateResult:
    """One probe call (`runner` is a MiniSweRunner); every way it can fall short of a session's first
    call is a failure; a session cap too small for the call limit is a warning. `sessions`: how many
    sessions the run plans and `models` how many paying models share --budget, for the budget a
    refusal or a warning names."""
    from pytest_predbench.session.model_settings import UnknownModelError

    gate = f"model {model}"
    try:
        probe = runner.probe(model, limits, version)
    except UnknownModelError as exc:
        return _failed(gate, _first_line(exc))
    if probe.missing_keys:
        keys = ", ".join(probe.missing_keys)
        return _failed(gate, f"litellm finds no {keys} in the environment for this model: set it (no call was made)")
    spent = probe.dollars
    if probe.failure is not None:
        stop = probe.failure
        cause = f"{stop.exception_class}: " if stop.exception_class else ""
        detail = f"the probe call got no answer ({stop.kind.value}: {cause}{stop.detail})"
        if stop.kind is StopKind.COST_LIMIT and probe.first_call_worst_case > 0:
            detail += "; " + budget_that_passes(probe.first_call_worst_case, sessions, models, "would pass")
        return _failed(gate, detail, spent)
    if probe.answered_as is None:
        return _failed(gate, f"asked for {probe.requested!r}; the response does not say which model answered", spent)
    if probe.answered_as != probe.requested:
        return _failed(
            gate,
            f"asked for {probe.requested!r}, answered by {probe.answered_as!r}: "
            "the model must be exactly the one requested (pin a dated version if the provider aliases)",
            spent,
        )
    if probe.prompt_tokens is None or probe.completion_tokens is None:
        return _failed(gate, "the provider reported no token usage: its spend cannot be metered", spent)
    if probe.prompt_tokens < PROMPT_ARRIVAL * probe.prompt_tokens_counted:
        return _failed(
            gate,
            f"the provider counted {probe.prompt_tokens} prompt tokens of the {probe.prompt_tokens_counted} "
            "sent: the prompt did not arrive whole",
            spent,
        )
    if not spent > 0:
        return _failed(gate, f"the probe call cost ${spent}: the price must be known and non-zero", spent)
    detail = (
        f"asked for {probe.requested!r}, answered as exactly that, in {probe.seconds:.1f}s, "
        f"to the {probe.prompt_tokens}-token "
        f"first prompt; cost ${spent:.6f}; a first call costs at most ${probe.first_call_worst_case:.6f} "
        f"of the ${limits.dollars:g} session limit"
    )
    warning = cap_warning(probe.rates, probe.prompt_tokens_counted, limits, sessions, models)
    if warning:
        return GateResult(gate=gate, status=GateStatus.WARNING, detail=f"{warning}; {detail}", dollars=spent)
    return _passed(gate, detail, spent)


BASELINE_CHECK = "predbench-probe --help >/dev/null && python3 --version"


def baseline_gate(
    record: EnvRecord | None, model: str, bwrap: str = "bwrap", limits: SessionLimits | None = None
) -> GateResult:
    """A baseline calls no model and has no price, so it needs no probe call: its gate is its own
    program, `predbench-probe`, starting in the sandbox its sessions get (on the sandbox's python3)."""
    from pytest_predbench.session import baseline

    gate = f"model {model}"
    if record is None:
        return GateResult(gate=gate, status=GateStatus.SKIPPED, detail="needs the pred environment record")
    result = in_sandbox(record, BASELINE_CHECK, bwrap, tools=baseline.probe_tools(), limits=limits)
    if isinstance(result, str):
        return _failed(gate, f"the baseline's sandbox does not start: {result}")
    said = " | ".join(line.strip() for line in result.output.splitlines() if line.strip())[:200]
    if result.returncode != 0:
        return _failed(gate, f"inside the sandbox `{BASELINE_CHECK}` exited {result.returncode}: {said or 'no output'}")
    return _passed(
        gate,
        f"{baseline.LABEL}: no probe call and no price to check; its program {baseline.PROBE_TOOL} "
        f"(sha256 {baseline.probe_sha256()[:12]}) starts in the sandbox on {said}",
    )


# -- installed agents ----------------------------------------------------------------------


def installed_agents(agents: Iterable[str]) -> list[str]:
    """The agents of a run that are programs installed into the sandbox (opencode), not a loop in the
    harness: those with an installed version (state/entrants.py)."""
    from pytest_predbench.state.entrants import installed_version

    return sorted({agent for agent in agents if installed_version(agent) is not None})


def agent_gate(record: EnvRecord, agent: str, limits: SessionLimits, keys: dict[str, str]) -> GateResult:
    """An installed agent's binary and version, the endpoint from inside its sandbox, no key visible
    there (run/agent_gate.py); `keys`: the keys the harness holds, by where it holds them."""
    from pytest_predbench.run.agent_gate import opencode_check

    gate = f"agent {agent}"
    problems, detail = opencode_check(record, limits, keys)
    if problems:
        return _failed(gate, f"{agent}: " + "; ".join(problems))
    return _passed(gate, detail)


# -- all of them ---------------------------------------------------------------------------


def run_gates(
    models: list[str],
    runner: str,
    limits: SessionLimits,
    *,
    version: str,
    bug_pool: str | None = None,
    model_settings: Path | None = None,
    needs_pred: bool = True,
    record_path: Path | None = None,
    sessions: int = 1,
    agents: list[str] | None = None,
) -> list[GateResult]:
    """Every gate that applies to a run of `models` (those that will run) with `runner`, in order;
    `agents`: every agent of the run (default: `runner` alone), each installed one checked in its
    sandbox when a model will run under it.

    A gate whose prerequisite failed is SKIPPED (pred's record feeds the source, sandbox and agent
    gates). The model gates always run, so one preflight names every model that cannot run.
    """
    from pytest_predbench.session import baseline

    real = runner != "fake"
    baselines = [model for model in models if baseline.is_baseline(model)]
    sandboxed = real or bool(baselines)
    results: list[GateResult] = []
    record = None
    no_bounds = False
    if sandboxed or needs_pred:
        pred, record = pred_gate(version, bug_pool, record_path)
        results.append(pred)
        needs = ["source", *(["sandbox"] if sandboxed else [])]
        bounds = bounds_gate(limits) if sandboxed else None
        no_bounds = bounds is not None and bounds.status is GateStatus.FAILED
        if record is None:
            results += [
                GateResult(gate=g, status=GateStatus.SKIPPED, detail="needs the pred environment record") for g in needs
            ]
        else:
            results.append(source_gate(record))
            if no_bounds:
                results.append(GateResult(gate="sandbox", status=GateStatus.SKIPPED, detail="needs the bounds"))
            elif sandboxed:
                results.append(sandbox_gate(record, limits=limits))
        if bounds is not None:
            results.append(bounds)
    for model in baselines:  # no session's sandbox can start without its bounds
        skip = GateResult(gate=f"model {model}", status=GateStatus.SKIPPED, detail="needs the bounds")
        results.append(skip if no_bounds else baseline_gate(record, model, limits=limits))
    models = [model for model in models if model not in baselines]
    if real and models:
        from pytest_predbench.run.agent_gate import held_keys
        from pytest_predbench.session.miniswe import MiniSweRunner
        from pytest_predbench.session.model_settings import SettingsError

        try:
            probe_runner = MiniSweRunner(model_settings)
        except SettingsError as exc:
            return [*results, _failed("model settings", _first_line(exc))]
        keys = held_keys(probe_runner.settings, models)
        for agent in installed_agents(agents or [runner]):
            if record is None or no_bounds:
                needs = "the pred environment record" if record is None else "the bounds"
                results.append(GateResult(gate=f"agent {agent}", status=GateStatus.SKIPPED, detail=f"needs {needs}"))
            else:
                results.append(agent_gate(record, agent, limits, keys))
        paying = sum(not baseline.is_baseline(m) for m in models)
        results += [model_gate(probe_runner, model, limits, sessions, paying, version=version) for model in models]
    return results


def failures(results: list[GateResult]) -> list[GateResult]:
    return [r for r in results if r.status is GateStatus.FAILED]


def spent(results: list[GateResult]) -> float:
    return sum(r.dollars for r in results)


# -- a run's preflight ---------------------------------------------------------------------


class PreflightError(Exception):
    """A gate failed: the run does not start. One line per failed gate."""

    def __init__(self, lines: list[str]):
        super().__init__(*lines)
        self.lines = lines


class PreflightEntry(BaseModel):
    """One invocation's preflight, kept in the run directory (preflight.json)."""

    invocation: str
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    gates: list[GateResult]

    @computed_field
    @property
    def dollars(self) -> float:
        """What the probes cost: real money, spent before the ledger's first reservation, and
        reported here rather than charged to a cap (a probe must not cost a model a session)."""
        return spent(self.gates)


class PreflightLog(BaseModel):
    entries: list[PreflightEntry] = []


def models_to_run(plan: "Plan", done: Iterable[str]) -> list[str]:
    """The plan's models with an item not in `done` (the items with a terminal record)."""
    finished = set(done)
    return sorted({item.model for item in plan.items() if item.key not in finished})


def plan_gates(plan: "Plan", models: list[str] | None = None) -> list[GateResult]:
    """Every gate of a plan, probing `models` (default: all of the plan's); PreflightError (one
    line per failed gate) unless all passed. The gates, and everything after them, stand on the
    plan's pred version and bug pool, passed as values (a resume or a join included)."""
    options = plan.options
    results = run_gates(
        plan.models if models is None else models,
        plan.agents[0],  # a fake plan has no other agent (run/planning.py)
        plan.limits,
        version=plan.pred_version,
        bug_pool=options.bug_pool,
        model_settings=Path(options.model_settings) if options.model_settings else None,
        needs_pred=plan.pred is not None,
        sessions=len(plan.items()),
        agents=plan.agents,
    )
    bad = failures(results)
    if bad:
        raise PreflightError([f"{r.line}" for r in bad])
    return results
