"""The one session table: its columns and what each means, shared by `sessions_df`,
`sessions.parquet` and `results.csv` (a test compares the three).

The three differ only in where they stand. `sessions_df` (and the `sessions.parquet` written from
it) shows a run as it is recorded now, live runs included, with the verdicts the run gave; results.csv
is the published leaderboard's, with the report's re-verified counts, and only on a run the gate let
through. Lists are Python lists in the frames and "; "-joined in the CSV; file paths are relative to
the run directory in the frames and to the report (like every leaderboard link) in the CSV.
"""

from pytest_predbench.state.records import ItemStatus

SESSION_COLUMNS: dict[str, str] = {
    "run": "which run, from 1 in the order given",
    "run_id": "the run's id (its directory's name, or its id in the store)",
    "run_name": "the name given with --run-name (empty when none)",
    "run_dir": "where the run is",
    "runner": "its agent: mini-swe, opencode, fake (measures no model) or baseline",
    "agent_version": "that agent's version, where known (empty: unknown, or no agent program)",
    "model": "the model id",
    "entrant": "the (agent, model) pair's label, its leaderboard row: the model id, '<agent>:' first unless mini-swe",
    "label": "'baseline (no model)' for a baseline",
    "session": "the session's number, from 1",
    "item": "<entrant>-s<NN>: the test id",
    "state": "done, skipped, infra, running, waiting, abandoned or undecided",
    "complete": "the item has a terminal record",
    "status": "ok, false alarm, skipped (budget) or infra: as every report says it",
    "stop_reason": "why the session stopped (finished, cost_limit, call_limit, ...)",
    "stop_detail": "the stop's detail, or why the item has no result",
    "steps": "steps of its trajectory",
    "model_calls": "answered model calls",
    "pred_calls": "pred calls, scripts' included",
    "prompt_tokens": "all prompt tokens, cached and cache-written included",
    "cached_tokens": "prompt tokens read from the provider's cache",
    "cache_write_tokens": "prompt tokens written to the provider's cache",
    "completion_tokens": "completion tokens, reasoning included",
    "reasoning_tokens": "the completion tokens spent reasoning, when the provider says",
    "dollars": "what this attempt cost",
    "earlier_dollars": "what the item's earlier attempts cost (infrastructure failures, lost sessions)",
    "wall_seconds": "the session's wall time",
    "certificates": "certificates submitted",
    "accepted": "certificates accepted",
    "bugs": "distinct bugs (rules with an accepted wrong-answer certificate)",
    "crashes": "distinct crashes (rules with an accepted crash certificate)",
    "undecided": "certificates the verifier could not decide within its limits",
    "false_alarms": "certificates rejected",
    "precision": "accepted over judged certificates, undecided ones counted with the false alarms (verify/claims.py)",
    "bug_rules": "the bugs' rules",
    "crash_rules": "the crashes' rules",
    "known_bugs": "entries of the known-bug registry its accepted certificates match",
    "certificate_files": "its certificates' files",
    "verdict_files": "their verdicts' files",
    "trajectory": "its trajectory file",
    "record": "its item record",
    "finished_at": "when its record was written (UTC)",
}
COLUMNS = tuple(SESSION_COLUMNS)
LIST_COLUMNS = ("bug_rules", "crash_rules", "known_bugs", "certificate_files", "verdict_files")

STATUS_WORDS = {"passed": "ok", "false_alarm": "false alarm", "skipped_budget": "skipped (budget)"}
"""How every research surface names an item's status: not pytest's words ('passed' reads as a test result)."""


def status_word(status: str) -> str:
    """'ok', 'false alarm', 'skipped (budget)', 'infra', ...: a recorded status as a researcher reads it."""
    return STATUS_WORDS.get(status, status.replace("_", " "))


def settled_state(status: ItemStatus) -> str:
    """The state of an item with a record and no session open on it."""
    if status.is_result:
        return "done"
    return "infra" if not status.terminal else status.value.split("_")[0]
