"""results.csv: one row per planned session, for pandas (`pd.read_csv("results.csv")`).

Its columns are the session table's (report/columns.py), the same as `sessions_df`'s and
sessions.parquet's, with the report's re-verified counts. Budget skips are rows too (status
`skipped (budget)`, no stop reason), so the rows add up to the plan; filter on `state == "done"` for
the sessions that ran. `runner` says `fake` for the FAKE runner's rows, which
measure no model, and `baseline` for a baseline's (`label`: "baseline (no model)"), which call none.
Lists are joined with "; " and links are relative to the file, like every link of the leaderboard.
When a run stood on a minted bug pool, three columns follow: `pool` (its digest's start, or
`pristine`), `minted_bugs` (the minted bugs the session found) and `real_bugs` (the rules of its
certificates the pristine build accepts too).
"""

import csv
import io

from pytest_predbench.report.columns import COLUMNS, settled_state, status_word
from pytest_predbench.report.minted import MINTED, REAL, pool_name
from pytest_predbench.report.model import Leaderboard, SessionRow
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify.claims import Tally

POOL_COLUMNS = ("pool", "minted_bugs", "real_bugs")
"""Added when some run stood on a minted bug pool."""


def _pool_cells(board: Leaderboard, row: SessionRow) -> dict[str, str]:
    return {
        "pool": pool_name(board.pool.digest if board.pool else None),
        "minted_bugs": "; ".join(sorted({b for link in row.links if link.origin == MINTED for b in link.minted_bugs})),
        "real_bugs": "; ".join(sorted({link.rule or "" for link in row.links if link.origin == REAL})),
    }


def results_csv(boards: list[Leaderboard]) -> str:
    """Every session of every board (several: a comparison, `run` numbers the boards' runs apart)."""
    out = io.StringIO()
    pools = any(board.pool is not None for board in boards)
    writer = csv.DictWriter(out, fieldnames=COLUMNS + (POOL_COLUMNS if pools else ()), lineterminator="\n")
    writer.writeheader()
    offset = 0
    for board in boards:
        for row in board.sessions:
            writer.writerow(_cells(board, row, offset) | (_pool_cells(board, row) if pools else {}))
        offset += len(board.runs)
    return out.getvalue()


def _shown(rate: float | None) -> str:
    return "" if rate is None else f"{rate:.6g}"


def _cells(board: Leaderboard, row: SessionRow, offset: int) -> dict[str, object]:
    """One session's row: every column of the session table (report/columns.py)."""
    manifest = board.runs[row.run]
    status = ItemStatus(row.status)
    return {
        "run": offset + row.run + 1,
        "run_id": manifest.run_id or "",
        "run_name": manifest.run_name or "",
        "run_dir": manifest.path,
        "runner": row.runner or manifest.runner,
        "agent_version": row.agent_version or "",
        "model": row.model,
        "entrant": row.entrant or row.model,
        "label": row.label or "",
        "session": row.session,
        "item": row.item,
        "state": settled_state(status),
        "complete": status.terminal,
        "status": status_word(row.status),
        "stop_reason": row.stop_reason or "",
        "stop_detail": row.stop_detail,
        "steps": "" if row.steps is None else row.steps,
        "model_calls": row.model_calls,
        "pred_calls": row.pred_calls,
        "prompt_tokens": row.prompt_tokens,
        "cached_tokens": row.cached_tokens,
        "cache_write_tokens": row.cache_write_tokens,
        "completion_tokens": row.completion_tokens,
        "reasoning_tokens": row.reasoning_tokens,
        "dollars": f"{row.dollars:.9g}",
        "earlier_dollars": f"{row.earlier_dollars:.9g}",
        "wall_seconds": f"{row.wall_seconds:.6g}",
        "certificates": row.certificates,
        "accepted": row.accepted,
        "bugs": len(row.bugs),
        "crashes": len(row.crashes),
        "undecided": row.inconclusive,
        "false_alarms": row.rejected,
        "precision": _shown(Tally(row.accepted, row.rejected, row.inconclusive).precision),
        "bug_rules": "; ".join(row.bugs),
        "crash_rules": "; ".join(row.crashes),
        "known_bugs": "; ".join(sorted({b for link in row.links for b in link.known_bugs})),
        "certificate_files": "; ".join(link.certificate for link in row.links if link.certificate),
        "verdict_files": "; ".join(link.verdict for link in row.links if link.verdict),
        "trajectory": row.trajectory or "",
        "record": row.record,
        "finished_at": row.finished_at or "",
    }
