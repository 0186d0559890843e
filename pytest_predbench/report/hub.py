"""A run's tables as a Hugging Face dataset (optional: `pip install 'predbench[hf]'`).

Not part of any default path: nothing is pushed unless asked, and the `datasets` package is not a
dependency of predbench. The dataset gets two configurations, `sessions` and `certificates`, the
tables of report/frames.py.
"""

from pytest_predbench.report.frames import certificates_df, sessions_df, snapshots


class HubUnavailable(Exception):
    """The optional `datasets` package is not installed."""


def datasets_of(runs) -> dict:
    """{'sessions': Dataset, 'certificates': Dataset} of the runs."""
    try:
        import datasets
    except ImportError:
        raise HubUnavailable(
            "pushing to the Hugging Face hub needs the optional extra: pip install 'predbench[hf]'"
        ) from None
    snaps = snapshots(runs)
    tables = {"sessions": sessions_df(snaps), "certificates": certificates_df(snaps)}
    return {name: datasets.Dataset.from_pandas(frame, preserve_index=False) for name, frame in tables.items()}


def push_to_hub(runs, repo_id: str, private: bool = True) -> None:
    """Push the runs' tables to the dataset `repo_id` (a token from the usual HF_TOKEN / login)."""
    for name, dataset in datasets_of(runs).items():
        dataset.push_to_hub(repo_id, config_name=name, private=private)
