"""The plan of a run and its digest: what was asked for, and everything a result depends on.

The digest covers the models, the sessions, the limits and caps, the runner, the pinned pred
(version and binary hash), the prompt hash and the installed package versions. A run
directory keeps its plan; `--resume-bench` rebuilds the plan from the current code and
environment and refuses to continue unless the digests agree, so one run never mixes
results of two different setups.
"""

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from pytest_predbench import prompts
from pytest_predbench.atomic import CorruptStateError, read_model, write_model
from pytest_predbench.certificate import CertificateError, load_certificate
from pytest_predbench.environment import EnvRecord, PredEnvironmentError, checked_record, sha256_file
from pytest_predbench.fake_runner import FakeSettings
from pytest_predbench.runner import SessionLimits, StopKind

RUNNERS = ("mini-swe", "fake")
PACKAGES = ("pytest", "pytest-xdist", "pydantic", "filelock", "mini-swe-agent", "litellm")
DOLLAR_EPSILON = 1e-9
"""Float sums of dollars are compared with this slack; it is far below any real price."""


class PlanError(Exception):
    """The requested plan is invalid or differs from the one recorded; the message is one line."""


class PlanOptions(BaseModel):
    """What was asked for on the command line; kept so that a resume rebuilds the same plan."""

    model_config = ConfigDict(extra="forbid")

    models: list[str] = []
    sessions: int = 1
    budget: float = 1.00
    model_budget: float | None = None
    """Default: an equal share of `budget`."""
    session_budget: float | None = None
    """Default: the model budget divided by the sessions (capped), SessionLimits' default (uncapped)."""
    budget_cap: bool = True
    runner: str = "mini-swe"
    model_settings: str | None = None
    fake_cost: float = FakeSettings().cost
    fake_cost_jitter: float = 0.0
    fake_seconds: float = 0.0
    fake_certificates: list[str] = []
    fake_stop: StopKind = StopKind.SUBMITTED
    call_timeout: float | None = None
    """Default: SessionLimits' call timeout."""


class Budget(BaseModel):
    capped: bool
    total: float | None
    """None: no cap (--no-budget-cap); spend is still recorded."""
    per_model: float | None
    per_session: float
    """Every session starts only with exactly this much reserved, and runs under it as its hard limit."""


class PredInfo(BaseModel):
    version: str
    sha256: str
    source_sha256: str
    path: str
    """Where this machine keeps it (not part of the digest: the bytes are)."""
    source_dir: str

    @classmethod
    def from_record(cls, record: EnvRecord) -> "PredInfo":
        return cls(
            version=record.pred_version,
            sha256=record.pred_sha256,
            source_sha256=record.source_sha256,
            path=record.pred_path,
            source_dir=record.source_dir,
        )


class ModelIdentity(BaseModel):
    """Exactly what a real runner calls and at what price (never the extra keyword arguments:
    they may hold credentials)."""

    call_name: str
    api_base: str | None
    input_cost_per_token: float
    output_cost_per_token: float
    price_source: str
    demo_script_sha256: str | None = None
    """For a scripted demo model: the script it replays."""


class PlannedItem(NamedTuple):
    key: str
    """`<model>-s<NN>`: the test id and, with '/' made safe, the record's file name."""
    model: str
    session: int


class Plan(BaseModel):
    options: PlanOptions
    budget: Budget
    limits: SessionLimits
    fake: FakeSettings | None
    """The fake runner's canned behaviour (certificates by content), None for a real runner."""
    model_settings_sha256: str | None
    model_identities: dict[str, ModelIdentity] = {}
    """For a real runner: every model resolved to a priced identity before anything runs."""
    pred: PredInfo | None
    """Required when certificates can be verified; recorded whenever an environment record exists."""
    prompt_hash: str
    packages: dict[str, str | None]

    @property
    def models(self) -> list[str]:
        return self.options.models

    def content(self) -> dict:
        """What the digest covers: everything but where this machine keeps pred."""
        return self.model_dump(mode="json", exclude={"pred": {"path", "source_dir"}})

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.content(), sort_keys=True).encode()).hexdigest()

    def items(self) -> list[PlannedItem]:
        """Sessions interleave models, so a budget running out hits every model at the same point."""
        width = max(2, len(str(self.options.sessions)))
        return [
            PlannedItem(f"{model}-s{n:0{width}d}", model, n)
            for n in range(1, self.options.sessions + 1)
            for model in self.models
        ]


class PlanFile(BaseModel):
    """plan.json: the plan with its digest, re-checked on every read."""

    digest: str
    plan: Plan


def package_versions() -> dict[str, str | None]:
    """Installed versions from metadata only: importing litellm alone costs seconds."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _check_models(models: list[str]) -> list[str]:
    if not models:
        raise PlanError("no models: give --models a,b (litellm model ids, or demo/...)")
    for model in models:
        if not model or model != model.strip() or any(c.isspace() for c in model):
            raise PlanError(f"--models: {model!r} is not a model id (empty or with spaces)")
        if model.startswith("/") or ".." in model.split("/"):
            raise PlanError(f"--models: {model!r} is not a model id")
    duplicates = sorted({m for m in models if models.count(m) > 1})
    if duplicates:
        raise PlanError(f"--models lists {', '.join(duplicates)} more than once")
    return sorted(models)


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise PlanError(f"{name} must be a positive number of dollars, got {value}")


def resolve_budget(options: PlanOptions) -> Budget:
    _positive("--budget", options.budget)
    _positive("--model-budget", options.model_budget)
    _positive("--session-budget", options.session_budget)
    if not options.budget_cap:
        per_session = options.session_budget or SessionLimits().dollars
        return Budget(capped=False, total=None, per_model=None, per_session=per_session)
    per_model = options.model_budget or options.budget / len(options.models)
    per_session = options.session_budget or per_model / options.sessions
    if per_session > per_model + DOLLAR_EPSILON:
        raise PlanError(f"--session-budget {per_session} exceeds the per-model cap {per_model}: no session could start")
    return Budget(capped=True, total=options.budget, per_model=per_model, per_session=per_session)


def _fake_settings(options: PlanOptions) -> FakeSettings | None:
    if options.runner != "fake":
        if options.fake_certificates:
            raise PlanError("--fake-certificate needs --runner fake")
        return None
    if options.fake_cost < 0 or options.fake_cost_jitter < 0 or options.fake_seconds < 0:
        raise PlanError("--fake-cost, --fake-cost-jitter and --fake-seconds cannot be negative")
    try:
        certificates = [load_certificate(Path(path)) for path in options.fake_certificates]
    except CertificateError as exc:
        raise PlanError(f"--fake-certificate: {exc}") from None
    return FakeSettings(
        cost=options.fake_cost,
        cost_jitter=options.fake_cost_jitter,
        seconds=options.fake_seconds,
        certificates=certificates,
        stop=options.fake_stop,
    )


def _pred_info(required: bool) -> PredInfo | None:
    try:
        return PredInfo.from_record(checked_record())
    except (PredEnvironmentError, CorruptStateError) as exc:
        if required:
            raise PlanError(str(exc)) from None
        return None


def identify_models(options: PlanOptions) -> dict[str, ModelIdentity]:
    """Resolve every model through the model settings: an unknown or unpriced model is refused here,
    before anything is spent. Only the real runner needs it; litellm is imported only for a model
    whose price the settings do not give."""
    if options.runner == "fake":
        return {}
    from pytest_predbench import model_settings

    try:
        settings = model_settings.load_settings(Path(options.model_settings) if options.model_settings else None)
        resolved = {model: model_settings.resolve(model, settings) for model in options.models}
    except (model_settings.SettingsError, model_settings.UnknownModelError) as exc:
        raise PlanError(str(exc)) from None
    return {
        model: ModelIdentity(
            call_name=found.call_name,
            api_base=found.api_base,
            input_cost_per_token=found.input_cost_per_token or 0.0,
            output_cost_per_token=found.output_cost_per_token or 0.0,
            price_source=found.price_source,
            demo_script_sha256=sha256_file(found.demo_script) if found.demo_script else None,
        )
        for model, found in resolved.items()
    }


def build_plan(options: PlanOptions) -> Plan:
    """The plan these options give with the current code and environment (pred, prompt, packages)."""
    if options.runner not in RUNNERS:
        raise PlanError(f"--runner must be one of {', '.join(RUNNERS)}, got {options.runner!r}")
    options = options.model_copy(
        update={
            "models": _check_models(list(options.models)),
            # absolute, so that a resume from another directory reads the same files
            "fake_certificates": [str(Path(p).resolve()) for p in options.fake_certificates],
            "model_settings": str(Path(options.model_settings).resolve()) if options.model_settings else None,
        }
    )
    if options.sessions < 1:
        raise PlanError(f"--sessions must be at least 1, got {options.sessions}")
    if options.call_timeout is not None and not options.call_timeout > 0:
        raise PlanError(f"--call-timeout must be a positive number of seconds, got {options.call_timeout}")
    timeouts = {"call_timeout_s": options.call_timeout} if options.call_timeout is not None else {}
    budget = resolve_budget(options)
    fake = _fake_settings(options)
    settings_sha = None
    if options.model_settings:
        path = Path(options.model_settings)
        if not path.is_file():
            raise PlanError(f"--model-settings: no such file {path}")
        settings_sha = sha256_file(path)
    verifies = options.runner != "fake" or bool(options.fake_certificates)
    return Plan(
        options=options,
        budget=budget,
        limits=SessionLimits(dollars=budget.per_session, **timeouts),
        fake=fake,
        model_settings_sha256=settings_sha,
        model_identities=identify_models(options),
        pred=_pred_info(required=verifies),
        prompt_hash=prompts.prompt_hash(),
        packages=package_versions(),
    )


def write_plan(path: Path, plan: Plan) -> None:
    write_model(path, PlanFile(digest=plan.digest(), plan=plan))


def read_plan(path: Path) -> PlanFile:
    stored = read_model(path, PlanFile)
    if stored.plan.digest() != stored.digest:
        raise CorruptStateError(f"{path}: the plan does not match its digest (edited by hand?)")
    return stored


def _flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def first_difference(recorded: Plan, current: Plan) -> str:
    """The first field that differs, as 'field (run: x, now: y)', for a one-line refusal; what was
    asked for comes before what follows from it."""
    old = _flatten(recorded.content())
    new = _flatten(current.content())
    keys = sorted(old.keys() | new.keys(), key=lambda k: (not k.startswith("options."), k))
    for key in keys:
        if old.get(key) != new.get(key):
            return f"{key} (run: {old.get(key)!r}, now: {new.get(key)!r})"
    return "nothing"
