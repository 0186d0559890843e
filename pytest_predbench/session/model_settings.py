"""Which models can run, how litellm reaches them, and what each token costs.

Dollars are a hard spending cap, so a model without a known, non-zero price is refused
before any call. Prices come from litellm's price map, unless a model-settings file gives
them. That file is where real users configure their models; it is TOML:

    # one table per model id, as given to --models
    [models."my-llama"]
    litellm_model = "openai/llama-3.1-8b"       # what litellm is called with (default: the id)
    api_base = "http://localhost:8000/v1"       # optional
    input_cost_per_token = 1e-7                 # dollars; both or neither
    output_cost_per_token = 2e-7
    cache_read_input_token_cost = 1e-8          # optional, named as in litellm's price map
    cache_creation_input_token_cost = 1.25e-7   # optional
    cache_breakpoints = false                   # optional: cache-control marks in the messages
                                                #   (default: for Anthropic-style providers only)
    extra_kwargs = { temperature = 0 }          # passed to litellm.completion as they are
    training_cutoff = 2026-06-30                # optional: the report shows recall on known bugs
                                                #   disclosed after it apart (verify/known_bugs.py)

    [models."demo/my-script"]                   # a scripted model for the built-in demo server
    demo_script = "scripts/my-script.json"      # relative to this file
    input_cost_per_token = 1e-6
    output_cost_per_token = 4e-6

API keys are not written here: litellm reads them from the provider's usual environment
variables (OPENAI_API_KEY, ...) in the harness process, never in the agent's sandbox. A model
with an `api_base` (a local server) needs no key: when none is set, a placeholder is sent.

Built in, with no file: `demo/<name>` for every script in pytest_predbench/session/demo/scripts
(`demo/finder`, `demo/idle`), priced at DEMO_PRICE and DEMO_CACHE_PRICE by this same mechanism.

Prices given here are registered in litellm's price map under the model's litellm name, so that
litellm prices every call the same way whichever source its prices came from.

Importing this module does not import litellm (the orchestration validates --models
first); only the functions below that need litellm's model map do, and `resolve` only for a
model whose price is not given here.
"""

import datetime as dt
import difflib
import os
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_predbench.session.pricing import Rates
from pytest_predbench.verify.certificate import describe_validation_error

SECRET_NAME = re.compile(
    r"api[_-]?key|secret|password|credential|authorization|access[_-]?token|token$|_key$", re.IGNORECASE
)
"""A name that holds a secret: a provider's key variable (OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, HF_TOKEN, ...), an auth header, a keyword argument. One rule for what the
trajectories blank (session/agent.py) and what the preflight looks for in an agent's sandbox
(run/agent_gate.py)."""

DEMO_SCRIPT_DIR = Path(__file__).resolve().parent / "demo" / "scripts"
DEMO_PREFIX = "demo/"
DEMO_PRICE = (1e-6, 4e-6)
"""Dollars per input and per output token of every built-in demo model: small, never zero."""
DEMO_CACHE_PRICE = (1e-7, 1.25e-6)
"""Dollars per cached (read) and per cache-written prompt token of the built-in demo models: the
ratios of Anthropic's prices (a tenth, and a quarter more), as the demo server emulates caching."""
PLACEHOLDER_API_KEY = "none"
"""Sent to a model with an `api_base` and no key: a local server needs none, litellm's client one."""


class UnknownModelError(ValueError):
    """A model that cannot run: unknown, or without a known non-zero price. One line says why."""


class SettingsError(ValueError):
    """The model-settings file cannot be used; one line says where and why."""


class ModelEntry(BaseModel):
    """One table of the settings file (its key is the model id)."""

    model_config = ConfigDict(extra="forbid")

    litellm_model: str = ""
    """What litellm is called with; empty means the id itself."""
    api_base: str | None = None
    input_cost_per_token: float | None = Field(default=None, ge=0)
    output_cost_per_token: float | None = Field(default=None, ge=0)
    cache_read_input_token_cost: float | None = Field(default=None, ge=0)
    cache_creation_input_token_cost: float | None = Field(default=None, ge=0)
    cache_breakpoints: bool | None = None
    """Mark the prompt for the provider's cache (cache_control); None: Anthropic-style providers only."""
    extra_kwargs: dict[str, Any] = {}
    demo_script: Path | None = None
    """Set for scripted models: they are served by the built-in demo server."""
    training_cutoff: dt.date | None = None
    """The last day of the model's training data, when known: a known bug disclosed after it cannot
    have been read, so the report shows its recall apart."""


class ModelSettings(ModelEntry):
    model_id: str
    """The id given to --models."""
    price_source: str = ""
    """Where the prices came from: 'settings', 'demo' or 'litellm'."""

    @property
    def call_name(self) -> str:
        return self.litellm_model or self.model_id

    @property
    def is_demo(self) -> bool:
        return self.demo_script is not None

    @property
    def priced(self) -> bool:
        return bool(self.input_cost_per_token and self.output_cost_per_token)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, ModelEntry] = {}


def demo_server_name(model_id: str) -> str:
    """The model name the demo server plays a script under ('demo/finder' -> 'demo-finder')."""
    return "demo-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", model_id.removeprefix(DEMO_PREFIX)).strip("-")


def demo_model(model_id: str, script: Path, prices: tuple[float, float] = DEMO_PRICE) -> ModelSettings:
    return ModelSettings(
        model_id=model_id,
        litellm_model=f"openai/{demo_server_name(model_id)}",
        input_cost_per_token=prices[0],
        output_cost_per_token=prices[1],
        cache_read_input_token_cost=DEMO_CACHE_PRICE[0],
        cache_creation_input_token_cost=DEMO_CACHE_PRICE[1],
        demo_script=script,
        price_source="demo",
    )


def builtin_settings() -> dict[str, ModelSettings]:
    return {
        f"{DEMO_PREFIX}{path.stem}": demo_model(f"{DEMO_PREFIX}{path.stem}", path)
        for path in sorted(DEMO_SCRIPT_DIR.glob("*.json"))
    }


def _from_entry(model_id: str, entry: ModelEntry, base: Path) -> ModelSettings:
    if (entry.input_cost_per_token is None) != (entry.output_cost_per_token is None):
        raise SettingsError(f"model {model_id!r}: give both input_cost_per_token and output_cost_per_token, or neither")
    cache_prices = (entry.cache_read_input_token_cost, entry.cache_creation_input_token_cost)
    if entry.input_cost_per_token is None and any(p is not None for p in cache_prices):
        raise SettingsError(f"model {model_id!r}: cache prices need input_cost_per_token and output_cost_per_token too")
    fields = entry.model_dump()
    if entry.demo_script is not None:
        script = entry.demo_script if entry.demo_script.is_absolute() else base / entry.demo_script
        if not script.is_file():
            raise SettingsError(f"model {model_id!r}: demo_script {script} does not exist")
        fields["demo_script"] = script
        fields["litellm_model"] = f"openai/{demo_server_name(model_id)}"
    source = "settings" if entry.input_cost_per_token is not None else ""
    return ModelSettings(model_id=model_id, price_source=source, **fields)


def load_settings(path: Path | None = None) -> dict[str, ModelSettings]:
    """The built-in demo models, then the file's models (a file entry replaces a built-in one)."""
    settings = builtin_settings()
    if path is None:
        return settings
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read model settings {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"model settings {path} is not valid TOML: {exc}") from None
    try:
        parsed = _File.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(f"model settings {path}: {describe_validation_error(exc)}") from None
    for model_id, entry in parsed.models.items():
        try:
            settings[model_id] = _from_entry(model_id, entry, path.parent)
        except SettingsError as exc:
            raise SettingsError(f"model settings {path}: {exc}") from None
    return settings


def import_litellm() -> ModuleType:
    """litellm, imported offline (its bundled price map; no tokenizer downloads, which would be
    retried in the background for every model whose tokenizer is not bundled) and quiet."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _litellm_info(name: str) -> dict | None:
    """The model's entry in litellm's map; None when the map has none (for some providers litellm
    makes one up, without prices, for any name: that is no entry)."""
    litellm = import_litellm()
    if not {name, name.split("/", 1)[-1]} & set(litellm.model_cost):
        return None
    try:
        return dict(litellm.get_model_info(name))
    except Exception:  # litellm raises a bare Exception for unmapped models
        return None


def close_matches(name: str, count: int = 3) -> list[str]:
    """Chat models in litellm's map whose names are close to `name` (with or without the provider)."""
    litellm = import_litellm()
    candidates = set()
    for key, info in litellm.model_cost.items():
        if not isinstance(info, dict) or info.get("mode") not in (None, "chat"):
            continue
        candidates.add(key)
        provider = info.get("litellm_provider")
        if provider and "/" not in key:
            candidates.add(f"{provider}/{key}")
    return difflib.get_close_matches(name, sorted(candidates), n=count, cutoff=0.8)


def resolve(model_id: str, settings: dict[str, ModelSettings]) -> ModelSettings:
    """The model's settings with both prices known and non-zero, or UnknownModelError."""
    found = settings.get(model_id)
    if found is None and model_id.startswith(DEMO_PREFIX):
        known = ", ".join(sorted(k for k in settings if k.startswith(DEMO_PREFIX)))
        raise UnknownModelError(f"unknown demo model {model_id!r}; known: {known}")
    found = found or ModelSettings(model_id=model_id)
    if found.input_cost_per_token is not None:
        if not found.priced:
            raise UnknownModelError(f"model {model_id!r} has a zero price in the model settings; a price must be > 0")
        return found
    info = _litellm_info(found.call_name)
    if info is None:
        matches = close_matches(found.call_name)
        hint = f"close matches: {', '.join(matches)}; " if matches else ""
        raise UnknownModelError(
            f"model {model_id!r} is not in litellm's model map ({hint}a model litellm does not know "
            "needs its prices in a model-settings file)"
        )
    prices = (info.get("input_cost_per_token") or 0.0, info.get("output_cost_per_token") or 0.0)
    if not all(p > 0 for p in prices):
        raise UnknownModelError(
            f"model {model_id!r} has no non-zero price in litellm's price map; "
            "give input_cost_per_token and output_cost_per_token for it in a model-settings file"
        )
    return found.model_copy(
        update={
            "input_cost_per_token": prices[0],
            "output_cost_per_token": prices[1],
            "cache_read_input_token_cost": info.get("cache_read_input_token_cost"),
            "cache_creation_input_token_cost": info.get("cache_creation_input_token_cost"),
            "price_source": "litellm",
        }
    )


# -- what a session needs from litellm's model map (the agent stack calls these) ----------------------


def provider(settings: ModelSettings) -> str:
    """litellm's provider for the model ('openai', 'anthropic', ...; '' when litellm cannot tell)."""
    litellm = import_litellm()
    try:
        return str(litellm.get_llm_provider(settings.call_name, api_base=settings.api_base)[1])
    except Exception:  # an unknown provider prefix: litellm's own call will say so
        return ""


def register_prices(settings: ModelSettings) -> None:
    """Put prices given in the settings (or the demo's) into litellm's price map under the model's
    litellm name, so that litellm prices its calls; a model priced by litellm is already there."""
    if settings.price_source == "litellm" or not settings.priced:
        return
    entry: dict[str, Any] = {
        "input_cost_per_token": settings.input_cost_per_token,
        "output_cost_per_token": settings.output_cost_per_token,
        "litellm_provider": provider(settings) or "openai",
        "mode": "chat",
    }
    for key in ("cache_read_input_token_cost", "cache_creation_input_token_cost"):
        given = getattr(settings, key)
        if given is not None:
            entry["supports_prompt_caching"] = True
        # not given: a cached token costs what any prompt token does (litellm would make it free)
        entry[key] = settings.input_cost_per_token if given is None else given
    import_litellm().register_model({settings.call_name: entry})


def price_rates(settings: ModelSettings, caching: bool) -> Rates:
    """The model's rates from litellm's price map (its own, or the settings' registered there)."""
    register_prices(settings)
    info = _litellm_info(settings.call_name)
    if info is None:  # registered a moment ago, so litellm cannot lose it; kept for a clear error
        raise UnknownModelError(f"model {settings.model_id!r} is not in litellm's price map")
    return Rates.from_price_map(info, caching=caching and (uses_cache_breakpoints(settings) or _caches_itself(info)))


def _caches_itself(info: dict) -> bool:
    """Providers that cache a repeated prefix without being asked (OpenAI, DeepSeek, ...)."""
    return bool(info.get("supports_prompt_caching")) and info.get("litellm_provider") not in ("anthropic", "bedrock")


def uses_cache_breakpoints(settings: ModelSettings) -> bool:
    """Whether the prompt must carry cache-control marks for the provider to cache it: Anthropic's
    models, wherever they are served (the demo server emulates that kind of cache)."""
    if settings.cache_breakpoints is not None:
        return settings.cache_breakpoints
    if settings.is_demo:
        return True
    return provider(settings) == "anthropic" or "claude" in settings.call_name.lower()


def missing_api_keys(settings: ModelSettings) -> list[str]:
    """The environment variables litellm needs for this model and cannot find, without a call
    (litellm.validate_environment). None for a model with its own api_base or api_key."""
    if settings.is_demo or settings.api_base or "api_key" in settings.extra_kwargs:
        return []
    try:
        found = import_litellm().validate_environment(model=settings.call_name)
    except Exception:  # litellm cannot tell for this provider: its first call will
        return []
    return [str(key) for key in found.get("missing_keys") or []]


def needs_placeholder_key(settings: ModelSettings) -> bool:
    """A model on its own api_base without a key anywhere: litellm's client still wants one."""
    if not settings.api_base or settings.is_demo or "api_key" in settings.extra_kwargs:
        return False
    try:
        found = import_litellm().validate_environment(model=settings.call_name, api_base=settings.api_base)
    except Exception:
        return False
    return bool(found.get("missing_keys"))
