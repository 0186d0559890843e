"""`predbench plan --models a,b --sessions N --budget X`: what a plan will cost, before anything runs.

Two figures per model, from litellm's price map alone (no key, no call): *at most*, the money caps
the plan would enforce (the per-model cap, or every session at its cap when that is less), and
*typical*, a session that makes every model call its limit allows, by the preflight's estimate
(session/pricing.py: a prompt that starts at FIRST_PROMPT_TOKENS and grows by each call), stopped
at the session cap as a real session is. When the cap affords fewer calls than the limit, the line
names the budget that would afford them all (the same words as the preflight's warning).
"""

from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.run.planning import plan_options, resolve_budget
from pytest_predbench.run.preflight import budget_that_passes
from pytest_predbench.session import baseline
from pytest_predbench.session.pricing import estimate_session
from pytest_predbench.session.protocol import SessionLimits

FIRST_PROMPT_TOKENS = 1_500
"""A session's first prompt, in tokens (the measured real session of session/pricing.py); the
preflight counts the real one with its probe call."""


class ModelCost(BaseModel):
    model: str
    at_most: float
    typical: float
    calls: int
    """Model calls a session's cap affords (of the limit)."""
    note: str = ""


class PlanCost(BaseModel):
    models: list[ModelCost]
    sessions: int
    per_session: float
    per_model: float | None
    limit: int

    @property
    def at_most(self) -> float:
        return sum(m.at_most for m in self.models)

    @property
    def typical(self) -> float:
        return sum(m.typical for m in self.models)

    def lines(self) -> list[str]:
        out = [
            f"{m.model}: at most ${m.at_most:.2f}, typical ${m.typical:.2f} "
            f"({self.sessions} session(s) of {m.calls} of {self.limit} model calls){m.note}"
            for m in self.models
        ]
        out.append(f"plan: at most ${self.at_most:.2f}, typical ${self.typical:.2f} (no key used, no call made)")
        return out


def plan_cost(models: list[str], sessions: int, budget: float, model_settings: str | None = None) -> PlanCost:
    """The plan's cost; PlanError (bad options) or UnknownModelError (a model without a price)."""
    from pytest_predbench.session import model_settings as settings_module

    options = plan_options({"models": models, "sessions": sessions, "budget": budget})
    caps = resolve_budget(options)
    limits = SessionLimits(dollars=caps.per_session)
    known = settings_module.load_settings(None if model_settings is None else Path(model_settings))
    paying = sum(not baseline.is_baseline(m) for m in options.models)
    rows = []
    for model in options.models:
        if baseline.is_baseline(model):
            rows.append(ModelCost(model=model, at_most=0.0, typical=0.0, calls=limits.model_calls, note="; no model"))
            continue
        rates = settings_module.price_rates(settings_module.resolve(model, known), caching=limits.prompt_cache)
        estimate = estimate_session(
            rates, FIRST_PROMPT_TOKENS, limits.max_output_tokens, limits.dollars, limits.model_calls
        )
        at_most = min(caps.per_model or limits.dollars * sessions, limits.dollars * sessions)
        note = ""
        if estimate.calls < limits.model_calls:
            note = "; " + budget_that_passes(estimate.budget_for_limit, sessions, paying, "would afford them all")
        rows.append(ModelCost(model=model, at_most=at_most, typical=min(at_most, estimate.dollars * sessions),
                              calls=estimate.calls, note=note))  # fmt: skip
    return PlanCost(models=rows, sessions=sessions, per_session=limits.dollars, per_model=caps.per_model,
                    limit=limits.model_calls)  # fmt: skip
