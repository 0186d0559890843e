"""A run's data as pandas tables, for analysis in a notebook: one row per planned session, per
certificate, per step — on any run, finished, partial or live, local or exported from PostgreSQL (or
read from the store directly: `store_snapshot`). The public face is `pytest_predbench.analysis`.

Unlike the leaderboard these tables pass no gate and verify nothing again: they show the run as it
is recorded now, and say what is incomplete — every planned session has a row, with its `state`
('done', 'skipped', 'running', 'waiting', 'infra', 'abandoned', 'undecided') and `complete` (it has a
terminal record). Certificates carry the verdict the verifier gave in the run (`outcome`: accepted,
rejected or undecided; `unconfirmed`: rejected or undecided, which count alike in every rate and in
`precision`: verify/claims.py; a session's `undecided` counts its undecided certificates, unlike the
`state` 'undecided' of a session whose owner's liveness is unknown); the leaderboard's figures are
the re-verified ones. A running session shows what its worker last reported (steps, model calls,
pred calls and dollars so far: state/progress.py).

On a run on a minted bug pool, each certificate's row names its pool and the minted bugs whose rules
include its rule (for accepted ones); whether it is a real bug of the version (the pristine build
accepts it too) is the report's finding (report/minted.py): `certificates.parquet`, which
`predbench report` writes, carries it as `origin` and `real_bug`; `certificates_df` alone leaves them
empty unless given the report's origins.

A certificate of a known bug carries that bug's `disclosure` ('disclosed' or 'undisclosed' as of the
registry's date, verify/known_bugs.py) and `disclosed_on`; `after_cutoff` says whether it was disclosed
after the model's training cutoff (None: no cutoff in the model settings, or no known bug), so recall
can be counted apart on each.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_predbench.files import read_model
from pytest_predbench.report import minted
from pytest_predbench.report.columns import COLUMNS, LIST_COLUMNS, settled_state, status_word
from pytest_predbench.report.status import status_of
from pytest_predbench.report.trajectory import read_trajectory, recorded_steps
from pytest_predbench.session import baseline
from pytest_predbench.session.progress import read_progress
from pytest_predbench.state.audit import RunSnapshot, read_snapshot
from pytest_predbench.state.records import ItemRecord
from pytest_predbench.verify import claims
from pytest_predbench.verify.known_bugs import load_registry

if TYPE_CHECKING:
    import pandas


SESSION_COLUMNS = COLUMNS
"""The session table's columns: one list for sessions_df, sessions.parquet and results.csv (report/columns.py)."""
CERTIFICATE_COLUMNS = (
    "run", "run_dir", "model", "session", "item", "n", "violation", "claimed_rule", "accepted", "outcome",
    "unconfirmed", "rule",
    "verdict_violation", "reason", "source_type", "target_type", "known_bugs", "certificate_file", "verdict_file",
    "pool", "minted_bugs", "origin", "real_bug", "disclosure", "disclosed_on", "after_cutoff", "entrant",
)  # fmt: skip
Origins = dict[tuple[int, str, int], str]
"""(run, from 1 in the order given; item; certificate number) -> its origin on a pool run (report/minted.py)."""
STEP_COLUMNS = (
    "run", "run_dir", "model", "session", "item", "trajectory", "step", "message", "command", "observation",
    "returncode", "pred_calls", "harness", "entrant",
)  # fmt: skip


def store_snapshot(url: str, run_id: str) -> RunSnapshot:
    """A run kept in PostgreSQL, read in one consistent step (live or finished)."""
    from pytest_predbench.state.pgstore import PgStore

    store = PgStore(url, run_id)
    try:
        return store.snapshot(retry=False)
    finally:
        store.close()


def snapshots(runs) -> list[RunSnapshot]:
    """One snapshot per run given: a run directory (str or Path), a snapshot, or a list of them."""
    if isinstance(runs, str | Path | RunSnapshot):
        runs = [runs]
    return [run if isinstance(run, RunSnapshot) else read_snapshot(Path(run)) for run in runs]


def _frame(rows: list[dict], columns: tuple[str, ...]) -> "pandas.DataFrame":
    import pandas

    return pandas.DataFrame(rows, columns=list(columns))


def _session_row(n: int, snap: RunSnapshot, key: str, record: ItemRecord | None, state: str) -> dict:
    """One planned session as recorded now, in the session table's columns (report/columns.py)."""
    planned = snap.planned[key]
    result = record.result if record is not None else None
    accounting = result.accounting if result is not None else None
    row = dict.fromkeys(SESSION_COLUMNS)
    row |= {
        "run": n,
        "run_id": snap.run_id,
        "run_name": snap.run_name or "",
        "run_dir": snap.label,
        "runner": planned.agent,
        "agent_version": snap.plan.agent_version(planned.agent),
        "model": planned.model,
        "entrant": planned.account,
        "label": baseline.label(planned.model),
        "session": planned.session,
        "item": key,
        "state": state,
        "complete": record is not None and record.status.terminal,
        "dollars": 0.0,
        "earlier_dollars": 0.0,
        "certificates": 0,
        "accepted": 0,
        "bugs": 0,
        "crashes": 0,
        "undecided": 0,
        "false_alarms": 0,
        "precision": None,
        **{name: [] for name in LIST_COLUMNS},
    }
    if record is not None:
        registry = load_registry(snap.plan.pred_version)
        row |= {
            "status": status_word(record.status.value),
            "stop_reason": result.stop.kind.value if result is not None else None,
            "stop_detail": (result.stop.detail if result is not None else record.reason)[:300],
            "steps": recorded_steps(snap.run, record),
            "dollars": record.spent,
            "earlier_dollars": record.earlier_spent,
            "certificates": len(record.verdicts),
            "accepted": sum(v.accepted for v in record.verdicts),
            "bugs": len(record.verified_rules),
            "crashes": len(record.crash_rules),
            "undecided": record.inconclusive,
            "false_alarms": record.false_alarms,
            "precision": record.tally.precision,
            "bug_rules": record.verified_rules,
            "crash_rules": record.crash_rules,
            "known_bugs": _known(registry, record),
            "certificate_files": [f.certificate for f in record.certificate_files],
            "verdict_files": [f.verdict for f in record.certificate_files],
            "trajectory": result.trajectory_path if result is not None else None,
            "record": str(snap.run.item_record(key).relative_to(snap.run.path)),
            "finished_at": record.finished_at,
        }
    if accounting is not None:
        row |= {name: getattr(accounting, name) for name in ACCOUNTED}
    elif state == "running":
        progress = read_progress(snap.run.progress(key))
        if progress is not None:
            row |= {
                "steps": progress.steps,
                "model_calls": progress.model_calls,
                "pred_calls": progress.pred_calls,
                "dollars": progress.dollars,
                "wall_seconds": progress.elapsed_seconds,
            }
    return row


ACCOUNTED = (
    "model_calls", "pred_calls", "prompt_tokens", "cached_tokens", "cache_write_tokens", "completion_tokens",
    "reasoning_tokens", "wall_seconds",
)  # fmt: skip
"""The session table's columns a session's own accounting fills (session/protocol.py Accounting)."""


def _known(registry, record: ItemRecord) -> list[str]:
    """The known bugs the record's accepted certificates match (the version's registry)."""
    if record.result is None:
        return []
    found = set()
    for certificate, verdict in zip(record.result.certificates, record.verdicts, strict=False):
        if verdict.accepted:
            source, target = certificate.source, certificate.target
            found |= {bug.id for bug in registry.find(source.type, source.variant, target.type, target.variant)}
    return sorted(found)


def _state(record: ItemRecord | None, open_state: str | None) -> str:
    if open_state is not None and (record is None or not record.status.terminal):
        return open_state  # 'running', 'abandoned' or 'undecided'
    if record is None:
        return "waiting"
    return settled_state(record.status)


def sessions_df(runs) -> "pandas.DataFrame":
    """One row per planned session of every run, in plan order, with its state (see the module)."""
    rows = []
    for n, snap in enumerate(snapshots(runs), 1):
        status = status_of(snap)
        open_state = {s.item: s.state for s in status.open_sessions}
        records = snap.by_item()
        for key in snap.planned:
            record = records.get(key)
            rows.append(_session_row(n, snap, key, record, _state(record, open_state.get(key))))
    return _frame(rows, SESSION_COLUMNS)


def certificates_df(runs, origins: Origins | None = None) -> "pandas.DataFrame":
    """One row per certificate a session submitted, with the verdict it got in the run, and the
    known bugs of the run's own pred version it matches; on a pool run, the minted bugs of its rule
    and, where `origins` (the report's) say, whether it is a real bug (see the module)."""
    rows = []
    for n, snap in enumerate(snapshots(runs), 1):
        registry = load_registry(snap.plan.pred_version)
        pool = minted.run_pool(snap)
        cutoffs = {model: identity.training_cutoff for model, identity in snap.plan.model_identities.items()}
        for _, record in snap.records:
            if record.result is None:
                continue
            for i, (certificate, verdict) in enumerate(
                zip(record.result.certificates, record.verdicts, strict=False), 1
            ):
                files = record.certificate_files[i - 1] if i <= len(record.certificate_files) else None
                source, target = certificate.source, certificate.target
                origin = (origins or {}).get((n, record.item, i)) if pool else None
                known = verdict.accepted and origin in (None, minted.REAL)
                bugs = registry.find(source.type, source.variant, target.type, target.variant) if known else []
                cutoff = cutoffs.get(record.model)
                rows.append(
                    {
                        "run": n,
                        "run_dir": snap.label,
                        "model": record.model,
                        "entrant": record.account,
                        "session": record.session,
                        "item": record.item,
                        "n": i,
                        "violation": certificate.violation.value,
                        "claimed_rule": certificate.rule,
                        "accepted": verdict.accepted,
                        "outcome": claims.label(verdict.outcome),
                        "unconfirmed": verdict.outcome in claims.UNCONFIRMED,
                        "rule": verdict.rule,
                        "verdict_violation": verdict.violation.value if verdict.violation else None,
                        "reason": verdict.reason,
                        "source_type": source.type,
                        "target_type": target.type,
                        "known_bugs": [bug.id for bug in bugs],
                        "certificate_file": files.certificate if files else None,
                        "verdict_file": files.verdict if files else None,
                        "pool": pool.digest if pool else None,
                        "minted_bugs": (minted.minted_ids(pool, certificate) if verdict.accepted else [])
                        if pool
                        else None,
                        "origin": origin,
                        "real_bug": origin == minted.REAL if origin in minted.DECIDED else None,
                        "disclosure": bugs[0].disclosure.status if bugs else None,
                        "disclosed_on": bugs[0].disclosure.date if bugs else None,
                        "after_cutoff": bugs[0].disclosed_after(cutoff) if bugs and cutoff else None,
                    }
                )
    return _frame(rows, CERTIFICATE_COLUMNS)


def steps_df(runs) -> "pandas.DataFrame":
    """One row per step of every session's trajectory (a running session's steps so far)."""
    rows = []
    for n, snap in enumerate(snapshots(runs), 1):
        records = snap.by_item()
        for key in snap.planned:
            record = records.get(key)
            relative = record.result.trajectory_path if record is not None and record.result else None
            path = snap.run.inside(relative) if relative else snap.run.trajectory(key)
            trajectory = read_trajectory(path)
            for step in trajectory.steps:
                rows.append(
                    {
                        "run": n,
                        "run_dir": snap.label,
                        "model": snap.planned[key].model,
                        "entrant": snap.planned[key].account,
                        "session": snap.planned[key].session,
                        "item": key,
                        "trajectory": trajectory.kind,
                        "step": step.n,
                        "message": step.message,
                        "command": "\n".join(step.commands),
                        "observation": step.observation,
                        "returncode": step.returncode,
                        "pred_calls": step.pred_calls,
                        "harness": step.harness,
                    }
                )
    return _frame(rows, STEP_COLUMNS)


def models_df(board) -> "pandas.DataFrame":
    """The leaderboard's rows, one per entrant (agent and model: `model` its label, `runner` its agent,
    `model_id` the model) in rank order, exactly as leaderboard.json holds them
    (nested fields flattened: `recall.found`, `stop_reasons.cost_limit`). `board`: a Leaderboard,
    its leaderboard.json, or the directory `predbench report` wrote it to. Unlike the other tables,
    these are the published, re-verified figures: there is no per-model table of a run the gate
    refused."""
    import pandas

    from pytest_predbench.report.model import LEADERBOARD_JSON, Leaderboard

    if not isinstance(board, Leaderboard):
        path = Path(board)
        board = read_model(path / LEADERBOARD_JSON if path.is_dir() else path, Leaderboard)
    return pandas.json_normalize([row.model_dump(mode="json") for row in board.models])


FUNNEL_COLUMNS = (
    "run", "model", "entrant", "session", "item", "minted_bug", "reached", "triggered", "certified", "tried",
)  # fmt: skip


def funnel_df(board) -> "pandas.DataFrame":
    """On a pool run's leaderboard: one row per session and minted bug, whether the session reached,
    triggered and certified it (report/funnel.py) and how many of its instances the verifier tried —
    the published figures, like `models_df` (an empty table for a board on the version's own build)."""
    from pytest_predbench.report.model import LEADERBOARD_JSON, Leaderboard

    if not isinstance(board, Leaderboard):
        path = Path(board)
        board = read_model(path / LEADERBOARD_JSON if path.is_dir() else path, Leaderboard)
    rows = [
        {
            "run": row.run + 1,
            "model": row.model,
            "entrant": row.entrant,
            "session": row.session,
            "item": row.item,
            "minted_bug": bug.id,
            **bug.model_dump(include={"reached", "triggered", "certified", "tried"}),
        }
        for row in board.sessions
        for bug in row.funnel
    ]
    return _frame(rows, FUNNEL_COLUMNS)


def write_funnel_parquet(out: Path, board) -> Path:
    """funnel.parquet: `funnel_df` of the board, written whole then renamed."""
    return _write_frame(funnel_df(board), out / FUNNEL_PARQUET)


def write_models_parquet(out: Path, board) -> Path:
    """models.parquet: `models_df` of the board, written whole then renamed."""
    return _write_frame(models_df(board), out / MODELS_PARQUET)


def _write_frame(frame: "pandas.DataFrame", path: Path) -> Path:
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        frame.to_parquet(tmp, engine="pyarrow", index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


MODELS_PARQUET = "models.parquet"
FUNNEL_PARQUET = "funnel.parquet"
SESSIONS_PARQUET = "sessions.parquet"
CERTIFICATES_PARQUET = "certificates.parquet"


def write_parquet(out: Path, runs, origins: Origins | None = None) -> dict[str, Path]:
    """sessions.parquet and certificates.parquet in `out` (pyarrow), each written whole then renamed;
    `origins`: the report's, for pool runs' certificates."""
    paths = {"sessions.parquet": out / SESSIONS_PARQUET, "certificates.parquet": out / CERTIFICATES_PARQUET}
    snaps = snapshots(runs)
    _write_frame(sessions_df(snaps), paths["sessions.parquet"])
    _write_frame(certificates_df(snaps, origins), paths["certificates.parquet"])
    return paths
