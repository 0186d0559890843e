"""Shared fixtures. Tests that claim verification run the real pred: when it is missing they
fail (never skip) and say how to install it."""

import json
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record
from pytest_predbench.verify.pred import Pred
from tests.support.postgres import pg_server  # noqa: F401 -- the fixture, for every test that asks
from tests.support.versions import CALIBRATION_DIR, TEST_VERSION

pin.select(TEST_VERSION)  # the suite's fixtures are this version's (tests/support/versions.py)

GENUINE = CALIBRATION_DIR / "genuine_mvc_to_ensemble_suboptimal.json"


@pytest.fixture(scope="session")
def env_record() -> EnvRecord:
    """The checked environment record of the pinned pred."""
    try:
        return checked_record()
    except (PredEnvironmentError, CorruptStateError) as exc:
        pytest.fail(f"these tests need the real pred {TEST_VERSION} ({exc}); run `make versions`", pytrace=False)


@pytest.fixture(scope="session")
def pred(env_record: EnvRecord) -> Pred:
    return Pred(Path(env_record.pred_path))


@pytest.fixture
def genuine() -> dict:
    """The calibration set's real bug, as a fresh dict each test may alter."""
    return json.loads(GENUINE.read_text())
