"""A run whose sessions mostly stopped at a limit says so: its figures then measure the limits as
much as the models (a ranking of sessions cut off after three model calls ranks nothing). One
sentence, shown in the run's terminal summary and on the leaderboard (Markdown and HTML)."""

from collections.abc import Mapping

LIMIT_STOPS = ("cost_limit", "step_limit", "pred_limit", "time_limit")
"""Stop reasons that are a limit of the harness's, not the model's own choice to finish."""


def limit_note(stops: Mapping[str, int], who: str = "") -> str | None:
    """The sentence when more than half of the sessions that stopped hit a limit, else None."""
    total = sum(stops.values())
    hit = {reason: stops.get(reason, 0) for reason in LIMIT_STOPS if stops.get(reason, 0)}
    if not total or 2 * sum(hit.values()) <= total:
        return None
    reasons = ", ".join(f"{n} at {reason}" for reason, n in sorted(hit.items(), key=lambda kv: -kv[1]))
    return (
        f"{who}{sum(hit.values())} of {total} session(s) stopped at a limit ({reasons}): these figures measure the "
        "limits as much as the model; raise them (--max-model-calls, --max-pred-calls, --session-seconds, "
        "--session-budget; `predbench plan` prices a budget)"
    )
