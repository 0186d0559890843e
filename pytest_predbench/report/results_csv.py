"""results.csv: one row per planned session, for pandas (`pd.read_csv("results.csv")`).

Budget skips are rows too (status `skipped_budget`, no stop reason), so the rows add up to the plan;
filter on `status` for the sessions that ran. `runner` says `fake` for the FAKE runner's rows, which
measure no model, and `baseline` for a baseline's (`label`: "baseline (no model)"), which call none.
Lists are joined with "; " and links are relative to the file, like every link of the leaderboard.
When a run stood on a minted bug pool, three columns follow: `pool` (its digest's start, or
`pristine`), `minted_bugs` (the minted bugs the session found) and `real_bugs` (the rules of its
certificates the pristine build accepts too).
"""

import csv
import io

from pytest_predbench.report.minted import MINTED, REAL, pool_name
from pytest_predbench.report.model import Leaderboard, SessionRow

COLUMNS = (
    "run",
    "run_dir",
    "runner",
    "model",
    "label",
    "session",
    "item",
    "status",
    "stop_reason",
    "model_calls",
    "pred_calls",
    "prompt_tokens",
    "completion_tokens",
    "dollars",
    "wall_seconds",
    "certificates",
    "accepted",
    "rejected",
    "inconclusive",
    "bugs",
    "crashes",
    "known_bugs",
    "certificate_files",
    "verdict_files",
    "trajectory",
    "record",
)
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
            writer.writerow(
                {
                    "run": offset + row.run + 1,
                    "run_dir": board.runs[row.run].path,
                    "runner": row.runner or board.runs[row.run].runner,
                    "model": row.model,
                    "label": row.label or "",
                    "session": row.session,
                    "item": row.item,
                    "status": row.status,
                    "stop_reason": row.stop_reason or "",
                    "model_calls": row.model_calls,
                    "pred_calls": row.pred_calls,
                    "prompt_tokens": row.prompt_tokens,
                    "completion_tokens": row.completion_tokens,
                    "dollars": f"{row.dollars:.9g}",
                    "wall_seconds": f"{row.wall_seconds:.6g}",
                    "certificates": row.certificates,
                    "accepted": row.accepted,
                    "rejected": row.rejected,
                    "inconclusive": row.inconclusive,
                    "bugs": "; ".join(row.bugs),
                    "crashes": "; ".join(row.crashes),
                    "known_bugs": "; ".join(sorted({b for link in row.links for b in link.known_bugs})),
                    "certificate_files": "; ".join(link.certificate for link in row.links if link.certificate),
                    "verdict_files": "; ".join(link.verdict for link in row.links if link.verdict),
                    "trajectory": row.trajectory or "",
                    "record": row.record,
                }
                | (_pool_cells(board, row) if pools else {})
            )
        offset += len(board.runs)
    return out.getvalue()
