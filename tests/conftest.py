"""Shared fixtures. Tests that claim verification run the real pred: when it is missing they
fail (never skip) and say how to install it."""

import json
import os
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.mint.build import MintError
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record
from pytest_predbench.verify.pool import Pool, PoolError
from pytest_predbench.verify.pred import Pred
from tests.support.pools import minted_test_pool
from tests.support.postgres import pg_server  # noqa: F401 -- the fixture, for every test that asks
from tests.support.versions import CALIBRATION_DIR, TEST_VERSION

os.environ[pin.VERSION_ENV] = TEST_VERSION  # the default of every --pred-version the suite's commands parse

GENUINE = CALIBRATION_DIR / "genuine_mvc_to_ensemble_suboptimal.json"


@pytest.fixture(scope="session")
def env_record() -> EnvRecord:
    """The checked environment record of the pinned pred."""
    try:
        return checked_record(TEST_VERSION)
    except (PredEnvironmentError, CorruptStateError) as exc:
        pytest.fail(f"these tests need the real pred {TEST_VERSION} ({exc}); run `make versions`", pytrace=False)


@pytest.fixture(scope="session")
def pred(env_record: EnvRecord) -> Pred:
    return Pred(Path(env_record.pred_path))


@pytest.fixture(scope="session")
def minted_pool() -> Pool:
    """A real minted bug pool (pred 0.6.0, 2 bugs), minted once per machine (tests/support/pools.py).
    It is only loaded here: a test that runs on it passes it (or its path) where it is used."""
    try:
        return minted_test_pool()
    except (MintError, PredEnvironmentError, PoolError) as exc:
        pytest.fail(f"these tests need a minted bug pool and minting one failed: {exc}", pytrace=False)


@pytest.fixture
def genuine() -> dict:
    """The calibration set's real bug, as a fresh dict each test may alter."""
    return json.loads(GENUINE.read_text())
