"""Model settings: prices known and non-zero or refused, one-line errors, litellm only when needed."""

from pathlib import Path

import pytest

from pytest_predbench.session.model_settings import (
    DEMO_PRICE,
    SettingsError,
    UnknownModelError,
    demo_server_name,
    load_settings,
    resolve,
)

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_demo_models_are_built_in_and_priced():
    settings = load_settings(None)
    finder = resolve("demo/finder", settings)
    assert {"demo/finder", "demo/idle"} <= set(settings)
    assert (finder.input_cost_per_token, finder.output_cost_per_token) == DEMO_PRICE
    assert all(p > 0 for p in DEMO_PRICE)
    assert finder.is_demo and finder.demo_script.name == "finder.json"
    assert finder.call_name == "openai/demo-finder"
    assert demo_server_name("demo/finder") == "demo-finder"


def test_unknown_demo_model_is_refused_in_one_line():
    with pytest.raises(UnknownModelError) as info:
        resolve("demo/nothing", load_settings(None))
    message = str(info.value)
    assert "\n" not in message
    assert "demo/nothing" in message and "demo/finder" in message


def test_settings_file_prices_a_custom_model(tmp_path):
    path = write(
        tmp_path,
        '[models."my-llama"]\nlitellm_model = "openai/llama"\napi_base = "http://127.0.0.1:1/v1"\n'
        "input_cost_per_token = 1e-7\noutput_cost_per_token = 2e-7\nextra_kwargs = { temperature = 0.0 }\n",
    )
    settings = load_settings(path)
    llama = resolve("my-llama", settings)
    assert (llama.input_cost_per_token, llama.output_cost_per_token) == (1e-7, 2e-7)
    assert llama.call_name == "openai/llama" and llama.api_base == "http://127.0.0.1:1/v1"
    assert llama.extra_kwargs == {"temperature": 0.0}
    assert llama.price_source == "settings"
    assert "demo/finder" in settings  # the built-ins stay


def test_demo_script_paths_are_relative_to_the_settings_file():
    settings = load_settings(SCRIPTS / "models.toml")
    chatter = resolve("demo/chatter", settings)
    assert chatter.demo_script == SCRIPTS / "chatter.json"
    assert chatter.call_name == "openai/demo-chatter"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[models."m"]\ninput_cost_per_token = 1e-6\n', "both"),
        ('[models."m"]\nprice = 1\n', "price"),
        ('[models."m"\n', "not valid TOML"),
        ('[models."m"]\ninput_cost_per_token = -1\noutput_cost_per_token = 1\n', "input_cost_per_token"),
        ('[models."demo/x"]\ndemo_script = "missing.json"\n', "does not exist"),
    ],
)
def test_bad_settings_files_get_one_line_errors(tmp_path, text, expected):
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, text))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_settings_file(tmp_path):
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "none.toml")


def test_zero_price_is_refused(tmp_path):
    path = write(tmp_path, '[models."free"]\ninput_cost_per_token = 0\noutput_cost_per_token = 0\n')
    with pytest.raises(UnknownModelError, match="zero price"):
        resolve("free", load_settings(path))


def test_litellm_price_map_and_refusal_of_unpriced_models(tmp_path):
    settings = load_settings(None)
    known = resolve("gpt-4o", settings)
    assert known.price_source == "litellm"
    assert known.input_cost_per_token > 0 and known.output_cost_per_token > 0
    with pytest.raises(UnknownModelError) as info:
        resolve("openai/no-such-model-xyz", settings)
    assert "model-settings file" in str(info.value) and "\n" not in str(info.value)
    # contrast: the same model with a price given by the user
    path = write(
        tmp_path,
        '[models."openai/no-such-model-xyz"]\ninput_cost_per_token = 1e-6\noutput_cost_per_token = 1e-6\n',
    )
    assert resolve("openai/no-such-model-xyz", load_settings(path)).price_source == "settings"
