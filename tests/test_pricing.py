"""The harness's own dollar figures: the pre-call worst case never below what litellm can bill,
and the estimate of what a session cap affords. Rates from litellm's real price map."""

import pytest

from pytest_predbench.session.pricing import (
    GROWTH_TOKENS_PER_CALL,
    Rates,
    estimate_session,
)

TIERED = {
    "input_cost_per_token": 1.25e-6,
    "output_cost_per_token": 1e-5,
    "input_cost_per_token_above_200k_tokens": 2.5e-6,
    "output_cost_per_token_above_200k_tokens": 1.5e-5,
    "cache_read_input_token_cost": 3.1e-7,
    "cache_creation_input_token_cost": 1.6e-6,
    "cache_creation_input_token_cost_above_200k_tokens": 3.2e-6,
    "output_cost_per_reasoning_token": 1.2e-5,
    "input_cost_per_token_batches": 9e-6,  # not a tier: batches are never used
    "supports_prompt_caching": True,
}


def test_the_worst_case_takes_the_highest_tier_and_a_cache_write():
    cached, uncached = Rates.from_price_map(TIERED, caching=True), Rates.from_price_map(TIERED, caching=False)
    assert cached.worst_input == 3.2e-6 and uncached.worst_input == 2.5e-6
    assert cached.worst_output == uncached.worst_output == 1.5e-5
    assert cached.caches and not uncached.caches
    assert cached.worst_case(1000, 100) == pytest.approx(1000 * 3.2e-6 + 100 * 1.5e-5)


def test_the_worst_case_is_never_below_litellms_bill():
    """For a real model, the worst case of a call covers any mix of cached, written and fresh tokens."""
    from pytest_predbench.session.model_settings import import_litellm

    litellm = import_litellm()  # first: offline, with its bundled price map
    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    for model in ("anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-pro", "gpt-4o"):
        rates = Rates.from_price_map(litellm.get_model_info(model), caching=True)
        for prompt, cached, written in ((300_000, 0, 300_000), (10_000, 0, 0), (10_000, 9_000, 1_000)):
            usage = Usage(
                prompt_tokens=prompt,
                completion_tokens=2_000,
                prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=cached),
                cache_creation_input_tokens=written,
            )
            billed = sum(litellm.cost_per_token(model=model, usage_object=usage))
            assert billed <= rates.worst_case(prompt, 2_000) + 1e-12, (model, prompt, cached, written)


def test_a_session_estimate_counts_the_calls_a_cap_affords():
    rates = Rates(input=3e-6, output=1.5e-5, cache_read=3e-7, cache_write=3.75e-6, worst_input=3.75e-6,
                  worst_output=1.5e-5, caches=True)  # fmt: skip
    big = estimate_session(rates, first_prompt=1500, max_output=8192, cap=100.0, limit=60)
    assert big.calls == 60
    small = estimate_session(rates, first_prompt=1500, max_output=8192, cap=big.budget_for_limit / 4, limit=60)
    assert 0 < small.calls < 60 and small.budget_for_limit == big.budget_for_limit
    exact = estimate_session(rates, first_prompt=1500, max_output=8192, cap=big.budget_for_limit, limit=60)
    assert exact.calls == 60, "the budget it names affords every call"
    uncached = estimate_session(rates.model_copy(update={"caches": False}), 1500, 8192, 100.0, 60)
    assert uncached.budget_for_limit > 3 * big.budget_for_limit, "the whole prompt at full price, every call"
    assert GROWTH_TOKENS_PER_CALL > 0
