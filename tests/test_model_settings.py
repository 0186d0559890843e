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


def test_a_typo_in_a_model_id_gets_close_matches_from_litellms_map():
    with pytest.raises(UnknownModelError) as info:
        resolve("anthropic/claude-sonet-4-5", load_settings(None))
    message = str(info.value)
    assert "not in litellm's model map" in message and "\n" not in message
    assert "close matches: " in message and "anthropic/claude-sonnet-4-5" in message
    with pytest.raises(UnknownModelError) as far:  # contrast: nothing close, no guesses
        resolve("zzzz/qqqq-xyzzy", load_settings(None))
    assert "close matches" not in str(far.value)


def test_cache_prices_come_from_litellm_or_the_settings(tmp_path):
    sonnet = resolve("anthropic/claude-sonnet-4-5", load_settings(None))
    assert sonnet.cache_read_input_token_cost == pytest.approx(sonnet.input_cost_per_token / 10)
    assert sonnet.cache_creation_input_token_cost == pytest.approx(sonnet.input_cost_per_token * 1.25)
    path = write(
        tmp_path,
        '[models."mine"]\nlitellm_model = "openai/mine"\ninput_cost_per_token = 2e-6\noutput_cost_per_token = 8e-6\n'
        "cache_read_input_token_cost = 5e-7\ncache_breakpoints = true\n",
    )
    mine = resolve("mine", load_settings(path))
    assert (mine.cache_read_input_token_cost, mine.cache_creation_input_token_cost) == (5e-7, None)
    assert mine.cache_breakpoints is True
    with pytest.raises(SettingsError, match="cache prices need input_cost_per_token"):
        load_settings(write(tmp_path, '[models."m"]\ncache_read_input_token_cost = 1e-7\n'))


def test_rates_for_the_worst_case_and_cache_breakpoints(tmp_path):
    from pytest_predbench.session.model_settings import price_rates, uses_cache_breakpoints

    settings = load_settings(None)
    sonnet = resolve("anthropic/claude-sonnet-4-5", settings)
    cached, uncached = price_rates(sonnet, caching=True), price_rates(sonnet, caching=False)
    assert cached.caches and not uncached.caches
    assert cached.worst_input == sonnet.cache_creation_input_token_cost, "writing the cache costs most"
    assert uncached.worst_input == sonnet.input_cost_per_token
    assert uses_cache_breakpoints(sonnet) and uses_cache_breakpoints(resolve("demo/finder", settings))
    assert not uses_cache_breakpoints(resolve("gpt-4o", settings)), "OpenAI caches a repeated prefix itself"
    gpt = price_rates(resolve("gpt-4o", settings), caching=True)
    assert gpt.caches and gpt.worst_input == gpt.input, "automatic caching writes at no extra cost"


def test_a_missing_api_key_is_named_without_a_call(monkeypatch, tmp_path):
    from pytest_predbench.session.model_settings import missing_api_keys, needs_placeholder_key

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = load_settings(None)
    sonnet = resolve("anthropic/claude-sonnet-4-5", settings)
    assert missing_api_keys(sonnet) == ["ANTHROPIC_API_KEY"]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # contrast
    assert missing_api_keys(sonnet) == []
    assert missing_api_keys(resolve("demo/finder", settings)) == []
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = write(
        tmp_path,
        '[models."local"]\nlitellm_model = "openai/llama-3.1-8b"\napi_base = "http://127.0.0.1:1/v1"\n'
        "input_cost_per_token = 1e-7\noutput_cost_per_token = 2e-7\n",
    )
    local = resolve("local", load_settings(path))
    assert missing_api_keys(local) == [], "a local server needs no key"
    assert needs_placeholder_key(local), "but litellm's client wants one"


def test_a_model_priced_without_cache_prices_pays_full_price_for_cached_tokens(tmp_path):
    """litellm would price its cached tokens at 0; registered here, they cost the input price."""
    from pytest_predbench.session.model_settings import import_litellm, register_prices

    litellm = import_litellm()
    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    path = write(
        tmp_path,
        '[models."plain"]\nlitellm_model = "openai/plain-model-xyz"\napi_base = "http://127.0.0.1:1/v1"\n'
        "input_cost_per_token = 1e-6\noutput_cost_per_token = 4e-6\n",
    )
    register_prices(resolve("plain", load_settings(path)))
    usage = Usage(
        prompt_tokens=1000, completion_tokens=0, prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=900)
    )
    assert sum(litellm.cost_per_token(model="openai/plain-model-xyz", usage_object=usage)) == pytest.approx(1000 * 1e-6)
