"""The pred version the test suite stands on.

The suite's fixtures — the calibration bugs its tests alter, the demo scripts' certificates, the
known-bug counts — are pred 0.5.0's, so tests/conftest.py selects 0.5.0 for the whole run (its
subprocesses inherit the choice). Tests of 0.6.0, the default, select it themselves
(tests/test_versions.py), and the tests of the default clear the choice.
"""

from pytest_predbench.verify.calibration import calibration_dir

TEST_VERSION = "0.5.0"
CALIBRATION_DIR = calibration_dir(TEST_VERSION)
