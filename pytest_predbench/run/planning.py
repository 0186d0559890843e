"""Building a plan from what was asked for and the machine it runs on.

The options (PlanOptions) are checked, the budget resolved into caps, every model resolved to a
priced identity, and the pinned pred, the prompt hash and the package versions read off the
environment: a resume builds the plan again this way and compares digests.
"""

import math
from importlib import metadata
from pathlib import Path

from pydantic import ValidationError

from pytest_predbench.files import CorruptStateError
from pytest_predbench.session import baseline, prompts
from pytest_predbench.session.fake import FakeSettings
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.state import money
from pytest_predbench.state.entrants import AGENTS, FAKE, entrants, installed_version
from pytest_predbench.state.flags import Flag, flag_of
from pytest_predbench.state.plan import (
    DOLLAR_EPSILON,
    Budget,
    ModelIdentity,
    Plan,
    PlanError,
    PlanOptions,
    PoolInfo,
    PredInfo,
)
from pytest_predbench.verify import pin, pool
from pytest_predbench.verify.certificate import CertificateError, describe_validation_error, load_certificate
from pytest_predbench.verify.environment import (
    PredEnvironmentError,
    check_pred,
    checked_record,
    pool_record,
    sha256_file,
)
from pytest_predbench.verify.pool import PoolError
from pytest_predbench.verify.setup import ensured_record

PACKAGES = ("pytest", "pytest-xdist", "pydantic", "filelock", "mini-swe-agent", "litellm")


def plan_options(values: dict) -> PlanOptions:
    """The options of a plan from plain values (the command line's, a recorded plan's): one line
    naming what is wrong, as a PlanError."""
    try:
        return PlanOptions.model_validate(values)
    except ValidationError as exc:
        line = describe_validation_error(exc)
        field = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else ""
        flag = flag_of(PlanOptions.model_fields[field]) if field in PlanOptions.model_fields else None
        if flag is not None and line.startswith(f"{field}: "):  # named as the user gave it
            line = f"{flag.name}: {line[len(field) + 2 :]}"
        raise PlanError(line) from None


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
        raise PlanError("no models: give --models a,b (litellm model ids, demo/..., or baseline/random)")
    for model in models:
        if not model or model != model.strip() or any(c.isspace() for c in model):
            raise PlanError(f"--models: {model!r} is not a model id (empty or with spaces)")
        if model.startswith("/") or ".." in model.split("/"):
            raise PlanError(f"--models: {model!r} is not a model id")
        problem = baseline.unknown_baseline(model)
        if problem:
            raise PlanError(f"--models: {problem}")
    duplicates = sorted({m for m in models if models.count(m) > 1})
    if duplicates:
        raise PlanError(f"--models lists {', '.join(duplicates)} more than once")
    return sorted(models)


def _positive(name: str, value: float | None) -> None:
    if value is not None and not money.is_cap(value):
        raise PlanError(f"{name} must be a positive number of dollars, got {value}")


def resolve_budget(options: PlanOptions) -> Budget:
    _positive("--budget", options.budget)
    _positive("--model-budget", options.model_budget)
    _positive("--session-budget", options.session_budget)
    if not options.budget_cap:
        per_session = options.session_budget or SessionLimits().dollars
        return Budget(capped=False, total=None, per_model=None, per_session=per_session)
    per_model = options.model_budget or money.equal_share(options.budget, _accounts(options))
    per_session = options.session_budget or per_model / options.sessions
    if per_session > per_model + DOLLAR_EPSILON:
        raise PlanError(
            f"--session-budget {per_session} exceeds the per-entrant cap {per_model}: no session could start"
        )
    return Budget(capped=True, total=options.budget, per_model=per_model, per_session=per_session)


def _accounts(options: PlanOptions) -> list[str]:
    """The entrants' labels: who shares the budget (a baseline takes no share: state/money.py)."""
    return [entrant.label for entrant in entrants(options.agents, options.models)]


def _check_agents(agents: list[str]) -> list[str]:
    """The agents asked for, in a canonical order (the plan's digest does not depend on the spelling)."""
    if not agents:
        raise PlanError(f"no agents: give --agents, one or more of {', '.join(AGENTS)}")
    for agent in agents:
        if agent not in AGENTS:
            raise PlanError(f"--agents: each must be one of {', '.join(AGENTS)}, got {agent!r}")
    duplicates = sorted({a for a in agents if agents.count(a) > 1})
    if duplicates:
        raise PlanError(f"--agents lists {', '.join(duplicates)} more than once")
    if FAKE in agents and len(agents) > 1:
        raise PlanError("--agents: the fake runner measures no model, so it runs alone (--agents fake)")
    return sorted(agents, key=AGENTS.index)


def _fake_settings(options: PlanOptions) -> FakeSettings | None:
    if options.agents != [FAKE]:
        if options.fake_certificates:
            raise PlanError("--fake-certificate needs --agents fake")
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


def _pred_info(required: bool, version: str, minted: pool.Pool | None = None) -> PredInfo | None:
    """The build the run stands on: a pool's minted one, else the version's own (set up first when
    the plan verifies and this machine never built it), whatever pool the process had selected."""
    try:
        if minted is not None:
            record = pool_record(minted)
            check_pred(record)
            return PredInfo.from_record(record)
        if required:
            ensured_record(version)
        return PredInfo.from_record(checked_record(version))
    except (PredEnvironmentError, CorruptStateError) as exc:
        if required or minted is not None:
            raise PlanError(str(exc)) from None
        return None


def _bug_pool(options: PlanOptions) -> pool.Pool | None:
    """The pool `--bug-pool` names, checked file by file against its manifest, and on the version
    asked for (if one is): a one-line PlanError otherwise."""
    if options.bug_pool is None:
        return None
    try:
        return pool.load_for_version(options.bug_pool, options.pred_version)
    except PoolError as exc:
        raise PlanError(f"--bug-pool: {exc}") from None


def baseline_identity() -> ModelIdentity:
    """A baseline's identity: no model and no price; the probe it runs, by its sha256."""
    return ModelIdentity(
        call_name=baseline.CALL_NAME,
        api_base=None,
        input_cost_per_token=0.0,
        output_cost_per_token=0.0,
        price_source=baseline.PRICE_SOURCE,
        demo_script_sha256=baseline.probe_sha256(),
    )


def identify_models(options: PlanOptions) -> dict[str, ModelIdentity]:
    """Resolve every model through the model settings: an unknown or unpriced model is refused here,
    before anything is spent. Only the real runner needs it (a baseline is recorded with no price and
    the probe it runs); litellm is imported only for a model whose price the settings do not give."""
    identities = {model: baseline_identity() for model in options.models if baseline.is_baseline(model)}
    models = [model for model in options.models if not baseline.is_baseline(model)]
    if options.agents == [FAKE] or not models:
        return identities
    from pytest_predbench.session import model_settings

    try:
        settings = model_settings.load_settings(Path(options.model_settings) if options.model_settings else None)
        resolved = {model: model_settings.resolve(model, settings) for model in models}
    except (model_settings.SettingsError, model_settings.UnknownModelError) as exc:
        raise PlanError(str(exc)) from None
    return identities | {
        model: ModelIdentity(
            call_name=found.call_name,
            api_base=found.api_base,
            input_cost_per_token=found.input_cost_per_token or 0.0,
            output_cost_per_token=found.output_cost_per_token or 0.0,
            cache_read_input_token_cost=found.cache_read_input_token_cost,
            cache_creation_input_token_cost=found.cache_creation_input_token_cost,
            price_source=found.price_source,
            demo_script_sha256=sha256_file(found.demo_script) if found.demo_script else None,
            training_cutoff=found.training_cutoff,
        )
        for model, found in resolved.items()
    }


def session_limits(options: PlanOptions, dollars: float) -> SessionLimits:
    """The limits every session of the plan runs under: the options given (each limit option's Flag
    names the SessionLimits field it sets, state/flags.py), SessionLimits' defaults for the rest; one
    line naming the option for a value that cannot be a limit."""
    given: dict[str, object] = {"dollars": dollars}
    for field, info in PlanOptions.model_fields.items():
        flag, value = flag_of(info), getattr(options, field)
        if flag is None or flag.limit is None or value is None:
            continue
        if not isinstance(value, bool):
            _check_limit(flag, value)
        given[flag.limit] = value
    return SessionLimits.model_validate(given)


def _check_limit(flag: Flag, value: int | float) -> None:
    least, option = flag.least, flag.name
    if least is None and not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise PlanError(f"{option} must be a positive number of seconds, got {value}")
    if isinstance(least, float):
        if not (isinstance(value, int | float) and math.isfinite(value) and (value == 0 or value >= least)):
            raise PlanError(f"{option} must be a number of cores, {least:g} or more (0: no bound); got {value}")
    elif least is not None and value < least:
        raise PlanError(f"{option} must be a whole number, {least} or more; got {value}")


def build_plan(options: PlanOptions) -> Plan:
    """The plan these options give with the current code and environment (pred, prompt, packages)."""
    options = options.model_copy(
        update={
            "agents": _check_agents(list(options.agents)),
            "models": _check_models(list(options.models)),
            # absolute, so that a resume from another directory reads the same files
            "fake_certificates": [str(Path(p).resolve()) for p in options.fake_certificates],
            "model_settings": str(Path(options.model_settings).resolve()) if options.model_settings else None,
        }
    )
    if options.sessions < 1:
        raise PlanError(f"--sessions must be at least 1, got {options.sessions}")
    minted = _bug_pool(options)
    try:
        version = pin.check_version(options.pred_version or (minted.version if minted else pin.default_choice()))
    except pin.UnsupportedVersion as exc:
        raise PlanError(f"--pred-version: {exc}") from None
    options = options.model_copy(
        update={"pred_version": version, "bug_pool": str(minted.root) if minted else None}  # absolute
    )
    budget = resolve_budget(options)
    fake = _fake_settings(options)
    settings_sha = None
    if options.model_settings:
        path = Path(options.model_settings)
        if not path.is_file():
            raise PlanError(f"--model-settings: no such file {path}")
        settings_sha = sha256_file(path)
    baselines = any(baseline.is_baseline(model) for model in options.models)
    verifies = fake is None or bool(options.fake_certificates) or baselines
    labels = _accounts(options)
    clashes = sorted({label for label in labels if labels.count(label) > 1})
    if clashes:
        raise PlanError(f"--models: {', '.join(clashes)} names two entrants (a model id that is another's label)")
    return Plan(
        options=options,
        budget=budget,
        limits=session_limits(options, budget.per_session),
        fake=fake,
        model_settings_sha256=settings_sha,
        model_identities=identify_models(options),
        pred=_pred_info(required=verifies, version=version, minted=minted),
        pool=PoolInfo(digest=minted.digest, seed=minted.manifest.seed, bugs=[b.id for b in minted.manifest.bugs])
        if minted
        else None,
        prompt_hash=prompts.prompt_hash(version),
        packages=package_versions(),
        agent_versions={a: v for a in options.agents if (v := installed_version(a)) is not None},
    )
