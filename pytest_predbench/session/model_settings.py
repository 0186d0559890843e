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
    extra_kwargs = { api_key = "none" }         # passed to litellm.completion as they are

    [models."demo/my-script"]                   # a scripted model for the built-in demo server
    demo_script = "scripts/my-script.json"      # relative to this file
    input_cost_per_token = 1e-6
    output_cost_per_token = 4e-6

API keys are not written here: litellm reads them from the provider's usual environment
variables (OPENAI_API_KEY, ...) in the harness process, never in the agent's sandbox.

Built in, with no file: `demo/<name>` for every script in pytest_predbench/session/demo/scripts
(`demo/finder`, `demo/idle`), priced at DEMO_PRICE by this same mechanism.

Importing this module does not import litellm (the orchestration validates --models
first); only `resolve` does, and only for a model whose price is not given here.
"""

import os
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_predbench.verify.certificate import describe_validation_error

DEMO_SCRIPT_DIR = Path(__file__).resolve().parent / "demo" / "scripts"
DEMO_PREFIX = "demo/"
DEMO_PRICE = (1e-6, 4e-6)
"""Dollars per input and per output token of every built-in demo model: small, never zero."""


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
    extra_kwargs: dict[str, Any] = {}
    demo_script: Path | None = None
    """Set for scripted models: they are served by the built-in demo server."""


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
    """litellm, imported offline (its bundled price map) and quiet."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _litellm_prices(name: str) -> tuple[float, float] | None:
    litellm = import_litellm()
    try:
        info = litellm.get_model_info(name)
    except Exception:  # litellm raises a bare Exception for unmapped models
        return None
    prices = (info.get("input_cost_per_token") or 0.0, info.get("output_cost_per_token") or 0.0)
    return prices if all(p > 0 for p in prices) else None


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
    prices = _litellm_prices(found.call_name)
    if prices is None:
        raise UnknownModelError(
            f"model {model_id!r} has no known non-zero price in litellm's price map; "
            "give input_cost_per_token and output_cost_per_token for it in a model-settings file"
        )
    return found.model_copy(
        update={
            "input_cost_per_token": prices[0],
            "output_cost_per_token": prices[1],
            "price_source": "litellm",
        }
    )
