"""predbench's data layer for analysis: any run as pandas tables.

    from pytest_predbench.analysis import sessions_df, certificates_df, steps_df
    sessions_df("reports/20261201-054900-b23de4")          # a run directory: finished, partial or live
    sessions_df(["reports/run-a", "reports/run-b"])         # several runs, numbered by `run`
    sessions_df(store_snapshot(STORE, "may-eval"))          # a run kept in PostgreSQL, read live

`sessions_df` has one row per planned session with its `state` (done, skipped, running, waiting,
infra, abandoned) and `complete`; `certificates_df` one row per certificate with the verdict it got in
the run; `steps_df` one row per step of every trajectory; `models_df` the published leaderboard's
rows (models.parquet); `funnel_df` a pool run's minted bugs reached / triggered / certified per session
(funnel.parquet). sessions_df, sessions.parquet and results.csv share one column list
(report/columns.py). They verify nothing again: the published
figures are the leaderboard's (`predbench report`), which also writes sessions.parquet and
certificates.parquet beside results.csv. How each table is built: pytest_predbench/report/frames.py.
"""

from pytest_predbench.report.frames import certificates_df, funnel_df, models_df, sessions_df, steps_df, store_snapshot
from pytest_predbench.report.hub import push_to_hub

__all__ = ["certificates_df", "funnel_df", "models_df", "push_to_hub", "sessions_df", "steps_df", "store_snapshot"]
