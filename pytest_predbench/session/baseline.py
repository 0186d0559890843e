"""BaselineRunner: a reference bug finder with no model — random differential testing of every rule.

A leaderboard of models needs a floor to read against: how many bugs plain, systematic testing
finds with the same pred budget. The baseline is selected as a model id (`baseline/random`), runs
in the same plan next to real models, calls no model and spends no dollars; every output labels
its row "baseline (no model)".

It runs inside the very sandbox a model's session gets (built by submission.channel_sandbox: pred
and pred-extract behind the gateway that books every call, the library source, the scratch, the
`submit-certificate` channel), under the same limits: the pred-call quota (every call of the probe
is booked by the gateway, as a model's are), the wall time and the command timeout. Its only
extra is its program, `predbench-probe` (session/probe/predbench_probe.py, stdlib Python that runs
on the sandbox's python3, with the verifier's evaluation.py and instances.py beside it), and the
harness side here drives it one sandbox command at a time:

1. `predbench-probe catalogue`: the rules of the pinned pred that carry a solution back (one call);
2. the rules in an order shuffled by the session's seed (its id: reproducible, different per
   session); for each, one command `predbench-probe rule` with the rule's share of the remaining
   pred calls, which tries pred's canonical example and random variants, and submits a
   certificate through the channel when a round trip fails (see the probe's docstring);
3. until every rule was tried (`finished`), the pred calls are used up (`pred_limit`) or the wall
   time is (`time_limit`).

What it submitted is taken from the spool, as for any session, and judged by the same independent
verifier afterwards; a false alarm is a bug of the baseline. The trajectory records every command,
its pred calls and what the probe said it found.
"""

import hashlib
import json
import random
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import read_untrusted
from pytest_predbench.session.progress import report_progress
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
from pytest_predbench.session.sandbox import SCRATCH_DIR, Sandbox, SandboxError
from pytest_predbench.session.submission import Spool, channel_sandbox
from pytest_predbench.verify import evaluation, instances

RUNNER = "baseline"
"""The runner name its results and records carry."""
PREFIX = "baseline/"
BASELINES = ("baseline/random",)
LABEL = "baseline (no model)"
"""How every output labels a baseline's row."""
PROBE_TOOL = "predbench-probe"
PROBE_SCRIPT = Path(__file__).resolve().parent / "probe" / "predbench_probe.py"
PROBE_MODULES = {"evaluation.py": Path(evaluation.__file__), "instances.py": Path(instances.__file__)}
"""The verifier's own modules the probe imports (stdlib Python), installed next to it in the sandbox."""
CALL_NAME = PROBE_TOOL
"""What a baseline 'calls', as the plan's model identity records it (no model, no price)."""
PRICE_SOURCE = "baseline: no model, no price"

MIN_RULE_CALLS = 4
"""A rule's share of the pred calls is at least one instance's worth: create, reduce, solve twice."""
MAX_RULE_CALLS = 40
"""...and at most this, so that a large budget still walks every rule (then `finished`)."""
PROBE_MARGIN_S = 3.0
"""The probe stops this long before its command would be killed, keeping what it found."""
MIN_COMMAND_S = 6.0
"""Less wall time than this left: no rule can be tried in it (a canonical rule example alone takes
pred 1.5 s to build), so the session ends at its time limit."""
MAX_CATALOGUE_BYTES = 4 << 20


def is_baseline(model: str) -> bool:
    """A `baseline/...` model id names a baseline, not a model (BaselineRunner runs it)."""
    return model.startswith(PREFIX)


def label(model: str) -> str | None:
    """The label every output gives a baseline's row (None for a model)."""
    return LABEL if is_baseline(model) else None


def display(model: str) -> str:
    """A model id as a table shows it: a baseline's with its label."""
    return f"{model} — {LABEL}" if is_baseline(model) else model


def unknown_baseline(model: str) -> str | None:
    """Why `model` is not a baseline this version has, or None."""
    if not is_baseline(model) or model in BASELINES:
        return None
    return f"{model!r} is not a baseline; the baselines are {', '.join(BASELINES)}"


@cache
def probe_tools() -> dict[str, str]:
    """What the baseline installs in the sandbox's tool directory: the probe and the modules it imports."""
    files = {PROBE_TOOL: PROBE_SCRIPT, **PROBE_MODULES}
    return {name: path.read_text(encoding="utf-8") for name, path in files.items()}


def probe_sha256() -> str:
    """The sha256 of the probe and the modules it imports: recorded in the plan (its model identity),
    so the digest covers every line the baseline runs."""
    digest = hashlib.sha256()
    for name, text in sorted(probe_tools().items()):
        digest.update(f"{name}\0{text}\0".encode())
    return digest.hexdigest()


def session_seed(session_id: str, seed: int = 0) -> int:
    """The session's seed, from its id (reproducible; different for every session of a run)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{session_id}".encode()).digest()[:8], "big")


def rule_order(count: int, seed: int) -> list[int]:
    """The order the session walks the rules in: a shuffle seeded by the session."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


def rule_share(calls_left: int, rules_left: int) -> int:
    """A rule's share of the remaining pred calls: an even split, within [MIN, MAX]."""
    even = calls_left // max(1, rules_left)
    return max(MIN_RULE_CALLS, min(MAX_RULE_CALLS, even))


class Step(BaseModel):
    """One sandbox command, as the trajectory records it."""

    command: str
    returncode: int | None
    timed_out: bool = False
    seconds: float
    pred_calls: int
    said: dict | None = None
    """The probe's summary line (`PROBE {...}`), parsed; None when it printed none."""
    output: str = ""
    """The command's output, kept only when the probe printed no summary (a failure to read)."""
    receipts: list[str] = []
    """What the submission channel answered for each certificate the command submitted."""


def probe_summary(output: str) -> dict | None:
    """The last `PROBE {json}` line of a command's output."""
    for line in reversed(output.splitlines()):
        if line.startswith("PROBE "):
            try:
                said = json.loads(line[len("PROBE ") :])
            except ValueError:
                return None
            return said if isinstance(said, dict) else None
    return None


class _Walk:
    """One session's walk over the rules: the sandbox, its spool, the budget and the record."""

    def __init__(self, sandbox: Sandbox, spool: Spool, limits: SessionLimits, scratch: Path):
        self.sandbox = sandbox
        self.spool = spool
        self.limits = limits
        self.scratch = scratch
        self.started = time.monotonic()
        self.accounting = Accounting()
        self.steps: list[Step] = []
        self.rules: list[dict] = []
        self.tried = 0
        self.progress_path = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def calls_left(self) -> int:
        return self.limits.pred_calls - self.accounting.pred_calls

    def command(self, command: str) -> Step | StopReason:
        """Run one command within the limits; the stop reason when a limit ends the session."""
        timeout = min(self.limits.command_timeout_s, self.limits.wall_seconds - self.elapsed())
        if timeout < MIN_COMMAND_S:
            return StopReason(kind=StopKind.TIME_LIMIT, detail=self._progress("the wall time is used up"))
        if self.calls_left <= 0:
            return self._pred_limit()
        self.sandbox.set_pred_quota(self.calls_left)
        done = self.sandbox.run(command.replace("{deadline}", f"{max(1.0, timeout - PROBE_MARGIN_S):.1f}"), timeout)
        usage = self.sandbox.take_pred_usage()
        self.accounting.shell_actions += 1
        self.accounting.pred_calls += usage.calls
        said = probe_summary(done.output)
        step = Step(
            command=command,
            returncode=done.returncode,
            timed_out=done.timed_out,
            seconds=done.seconds,
            pred_calls=usage.calls,
            said=said,
            output="" if said else done.output[-2000:],
            receipts=[receipt.message() for receipt in self.spool.collect()],
        )
        self.steps.append(step)
        report_progress(self.progress_path, self.accounting, len(self.steps), self.elapsed())
        if usage.refused or self.calls_left < 0 or (said or {}).get("stopped") == "quota":
            return self._pred_limit()
        return step

    def _pred_limit(self) -> StopReason:
        why = f"the limit of {self.limits.pred_calls} pred calls is used up"
        return StopReason(kind=StopKind.PRED_LIMIT, detail=self._progress(why))

    def _progress(self, why: str) -> str:
        return f"{why} after {self.tried} of {len(self.rules) or '?'} rules; {len(self.spool.accepted)} certificate(s)"

    def catalogue(self) -> StopReason | None:
        """The rules, from the probe's catalogue in the scratch directory."""
        outcome = self.command(f"{PROBE_TOOL} catalogue {SCRATCH_DIR}/baseline/rules.json")
        if isinstance(outcome, StopReason):
            return outcome
        try:
            data = json.loads(read_untrusted(self.scratch / "baseline" / "rules.json", MAX_CATALOGUE_BYTES))
            self.rules = [rule for rule in data["rules"] if isinstance(rule, dict)]
        except (OSError, ValueError, TypeError, KeyError):
            detail = outcome.output.strip().splitlines()[-1:] or ["no output"]
            return StopReason(kind=StopKind.ERROR, detail=f"the probe wrote no rule catalogue: {detail[0][:200]}")
        return None

    def walk(self, seed: int) -> StopReason:
        stop = self.catalogue()
        if stop is not None:
            return stop
        for n, index in enumerate(rule_order(len(self.rules), seed)):
            share = min(self.calls_left, rule_share(self.calls_left, len(self.rules) - n))
            rule_seed = random.Random(f"{seed}:{index}").randrange(2**31)
            outcome = self.command(
                f"{PROBE_TOOL} rule --rules {SCRATCH_DIR}/baseline/rules.json --index {index} --seed {rule_seed} "
                f"--calls {share} --deadline {{deadline}} --out {SCRATCH_DIR}/baseline/work"
            )
            if isinstance(outcome, StopReason):
                return outcome
            self.tried += 1
        submitted = len(self.spool.accepted)
        detail = f"every one of the {len(self.rules)} rules tried; {submitted} certificate(s) submitted"
        return StopReason(kind=StopKind.FINISHED, detail=detail)


class BaselineRunner:
    """The AgentRunner of the `baseline/...` model ids (see the module docstring)."""

    name = RUNNER

    def run(self, env: SessionEnv, model: str, limits: SessionLimits) -> SessionResult:
        problem = unknown_baseline(model)
        if problem or not is_baseline(model):
            raise ValueError(problem or f"{model!r} is not a baseline")
        seed = session_seed(env.session_id, env.seed)
        trajectory = trajectory_file(env)
        state = Path(tempfile.mkdtemp(prefix="predbench-baseline-"))
        walk: _Walk | None = None
        sandbox = None
        interrupted = False
        pred_log = []
        try:
            sandbox, spool = channel_sandbox(
                pred_path=Path(env.pred_path),
                extractor_path=Path(env.extractor_path) if env.extractor_path else None,
                source_dir=Path(env.source_dir),
                state_dir=state,
                tools=probe_tools(),
                limits=limits,
                snapshots=env.instances_dir,
            )
            walk = _Walk(sandbox, spool, limits, sandbox.scratch)
            walk.progress_path = env.progress_path
            stop = walk.walk(seed)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into it: nothing was spent but time
            interrupted = True
            stop = StopReason(kind=StopKind.INTERRUPTED, detail="interrupted")
        except Exception as exc:  # the session ends; what ended it is recorded, never raised
            kind = StopKind.INFRA_ERROR if isinstance(exc, SandboxError) else StopKind.ERROR
            stop = StopReason(kind=kind, exception_class=exception_class(exc), detail=first_line(exc)[:300])
        finally:
            if sandbox is not None:
                pred_log = sandbox.take_pred_log()
                sandbox.close()
            shutil.rmtree(state, ignore_errors=True)
        accounting = walk.accounting if walk else Accounting()
        accounting.wall_seconds = round(walk.elapsed(), 3) if walk else 0.0
        result = SessionResult(
            runner=self.name,
            model=model,
            certificates=list(walk.spool.accepted) if walk else [],
            rejected_submissions=walk.spool.refused if walk else 0,
            accounting=accounting,
            stop=stop,
            trajectory_path=str(trajectory),
            prompt_hash="",
            pred_log=pred_log,
        )
        record = {
            "runner": self.name,
            "model": model,
            "label": LABEL,
            "seed": seed,
            "probe_sha256": probe_sha256(),
            "limits": limits.model_dump(mode="json"),
            "bounds": sandbox.enforcement.model_dump() if sandbox is not None else {},
            "rules": len(walk.rules) if walk else 0,
            "steps": [step.model_dump(mode="json") for step in walk.steps] if walk else [],
            "info": {"predbench": result.model_dump(mode="json")},
        }
        trajectory.write_text(json.dumps(record, indent=1) + "\n")
        if interrupted:
            raise SessionInterrupted(result)
        return result
