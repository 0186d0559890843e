"""Prices of one model as the harness uses them, and what a session may cost.

What a call *did* cost is litellm's business (session/agent.py prices the provider's usage with
litellm's `completion_cost`: cache reads and writes, long-context tiers, reasoning tokens). Two
figures are the harness's own, and both must err on the side of spending less:

- the worst case of the next call, checked against the session's dollar ceiling before the call
  is made: every prompt token at the highest input rate the model has (no cache discount, a cache
  write if that costs more, the highest long-context tier) and the full output limit at the
  highest output rate;
- the estimate of a whole session, for the preflight's warning that a session cap is too small
  for the model-call limit.

Nothing here imports litellm: model_settings.py reads the rates out of litellm's price map.
"""

import math
import re

from pydantic import BaseModel

INPUT_TIER = re.compile(r"^(input_cost_per_token|cache_creation_input_token_cost)_above_\d+k?_tokens$")
OUTPUT_TIER = re.compile(r"^output_cost_per_(token|reasoning_token)_above_\d+k?_tokens$")

GROWTH_TOKENS_PER_CALL = 1_000
"""How much a session's prompt grows per call (the model's reply and the observation): a measured
real session sent 416k prompt tokens over 28 calls from a 1.5k-token first prompt."""
OUTPUT_TOKENS_PER_CALL = 300
"""What an estimate assumes a reply costs in output tokens (a command and a sentence or two)."""


class Rates(BaseModel):
    """Dollars per token of one model."""

    input: float
    output: float
    cache_read: float | None = None
    """None: the provider prices cached prompt tokens as any other (or does not cache)."""
    cache_write: float | None = None
    """None: writing the cache costs the input rate."""
    worst_input: float
    """The highest rate any prompt token can cost: tiers and cache writes included."""
    worst_output: float
    caches: bool = False
    """Whether the session's prompts will be cached (prompt caching on and the provider supports it)."""

    @classmethod
    def from_price_map(cls, info: dict, caching: bool) -> "Rates":
        """The rates of a litellm price-map entry (`litellm.get_model_info`)."""

        def rate(key: str) -> float | None:
            value = info.get(key)
            return float(value) if isinstance(value, int | float) and value >= 0 else None

        base_in, base_out = rate("input_cost_per_token") or 0.0, rate("output_cost_per_token") or 0.0
        write = rate("cache_creation_input_token_cost")
        inputs = [base_in, *([write] if caching and write is not None else [])]
        outputs = [base_out, rate("output_cost_per_reasoning_token") or 0.0]
        for key in info:
            value = rate(key)
            if value is not None and INPUT_TIER.match(key) and (caching or key.startswith("input")):
                inputs.append(value)
            elif value is not None and OUTPUT_TIER.match(key):
                outputs.append(value)
        return cls(
            input=base_in,
            output=base_out,
            cache_read=rate("cache_read_input_token_cost"),
            cache_write=write,
            worst_input=max(inputs),
            worst_output=max(outputs),
            caches=caching and bool(info.get("supports_prompt_caching") or rate("cache_read_input_token_cost")),
        )

    def worst_case(self, prompt_tokens: int, output_tokens: int) -> float:
        """The most a call with this prompt and output limit can cost."""
        return prompt_tokens * self.worst_input + output_tokens * self.worst_output


class SessionEstimate(BaseModel):
    """How many calls a session cap affords, by the estimate's assumptions (a planning figure)."""

    calls: int
    """Calls that pass the dollar ceiling's pre-call check, up to the model-call limit."""
    budget_for_limit: float
    """The smallest session cap under which all `limit` calls pass that check."""
    limit: int
    dollars: float = 0.0
    """What those `calls` calls cost: a session's typical spend at the limits (a planning figure)."""


def estimate_session(rates: Rates, first_prompt: int, max_output: int, cap: float, limit: int) -> SessionEstimate:
    """Simulate a session of `limit` calls whose prompt starts at `first_prompt` tokens and grows by
    GROWTH_TOKENS_PER_CALL, each answered with OUTPUT_TOKENS_PER_CALL; with caching, each call reads
    the previous prompt from the cache and writes the rest. Each call must first pass the ceiling's
    check (spent + its worst case <= cap), as a real session does."""
    spent, needed, calls, stopped, paid = 0.0, 0.0, 0, False, 0.0
    previous = 0
    for i in range(limit):
        prompt = first_prompt + i * GROWTH_TOKENS_PER_CALL
        worst = rates.worst_case(prompt, max_output)
        needed = max(needed, spent + worst)
        stopped = stopped or spent + worst > cap  # a real session ends at its first refused call
        calls += not stopped
        if rates.caches:
            read, written = previous, prompt - previous
            cost = read * _or(rates.cache_read, rates.input) + written * _or(rates.cache_write, rates.input)
        else:
            cost = prompt * rates.input
        spent += cost + OUTPUT_TOKENS_PER_CALL * rates.output
        paid = paid if stopped else spent
        previous = prompt
    return SessionEstimate(calls=calls, budget_for_limit=_round_up_cents(needed), limit=limit, dollars=paid)


def _or(rate: float | None, default: float) -> float:
    return default if rate is None else rate


def _round_up_cents(dollars: float) -> float:
    return math.ceil(dollars * 100 - 1e-9) / 100
