"""Red-team round 4: attacks a helper whose only job was to break this round's changes found, kept
as tests of the mechanism that closed them (each failed before its fix): a weight's sum multiplied
is no plain sum (verify/exactness.py), and a short option's attached value is a path the gateway
checks (session/gateway.py `_values`). Each states what must hold, with the real pred and library."""

import json
import subprocess
from fractions import Fraction

import pytest

from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, checked_record
from pytest_predbench.verify.evaluation import Comparison, Evaluation, compare
from pytest_predbench.verify.exactness import library_arithmetic, precision

BETA = 1 + 2**-30
OMEGA = 1 + 2**-29


def _pcsf() -> dict:
    """One vertex, no edges. Omitting it costs beta * prize = (1 + 2^-30)^2 = 1 + 2^-29 + 2^-60
    (needs 60 bits, rounds to 1 + 2^-29); selecting it costs omega = 1 + 2^-29 exactly. Every number
    is a multiple of 2^-30 and small, so the SUM rule of exactness.py calls all sums exact: but
    PrizeCollectingSteinerForest's evaluate MULTIPLIES beta by the omitted prize sum (and adds omega
    kappa times, kappa up to n, not the configuration's largest value)."""
    return {
        "type": "PrizeCollectingSteinerForest",
        "variant": {"graph": "SimpleGraph", "weight": "f64"},
        "data": {
            "graph": {"num_vertices": 1, "edges": []},
            "vertex_prizes": [BETA],
            "edge_costs": [],
            "beta": BETA,
            "omega": OMEGA,
        },
    }


@pytest.fixture(scope="module")
def record_060() -> EnvRecord:
    """pred 0.6.0: PrizeCollectingSteinerForest is new in it (0.5.0, the suite's default, lacks it)."""
    try:
        return checked_record(version="0.6.0")
    except PredEnvironmentError as exc:
        pytest.fail(f"needs pred 0.6.0 ({exc})", pytrace=False)


def _evaluate(pred_path: str, tmp_path, instance: dict, config: list[int]) -> Evaluation:
    path = tmp_path / "pcsf.json"
    path.write_text(json.dumps(instance))
    out = subprocess.run(
        [pred_path, "evaluate", str(path), "--config", ",".join(map(str, config)), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Evaluation.parse(json.loads(out.stdout)["result"])


def test_pcsf_products_are_not_a_float_sum(record_060, tmp_path):
    """Selecting the vertex is exactly better (1 + 2^-29 < 1 + 2^-29 + 2^-60), yet pred prints the same
    value for both and the verifier, holding exact order, proves them EQUAL: a suboptimal target
    solution of PrizeCollectingSteinerForest/f64 would be certified optimal. Contrast: the exact
    values differ, so EQUAL is false."""
    instance = _pcsf()
    omitted = _evaluate(record_060.pred_path, tmp_path, instance, [0])
    selected = _evaluate(record_060.pred_path, tmp_path, instance, [1])
    assert Fraction(BETA) * Fraction(BETA) > Fraction(OMEGA)  # the exact values: not a tie
    assert omitted.text == selected.text  # pred rounds the product away
    table = library_arithmetic(record_060.source_dir)
    exactness = precision(instance, 1, table)
    assert compare(omitted, selected, exactness) is not Comparison.EQUAL, exactness.why


def test_short_option_with_attached_value_is_checked(tmp_path):
    """clap takes `-o/x` (and `-qo/x`) as `-o /x`: pred writes its output outside /scratch, through a
    symlink in it too, but `_outside` only looks past `=` in an option, so both pass. Contrast:
    `-o=/x` and `-o /x` (two args) are refused."""
    from pytest_predbench.session.gateway import _outside

    (tmp_path / "link").symlink_to("/predbench/source/src/lib.rs")
    assert _outside(tmp_path, "/scratch", "-o=/predbench/source/x")  # contrast: refused
    assert _outside(tmp_path, "/scratch", "/predbench/source/x")  # contrast: refused as a separate arg
    assert _outside(tmp_path, "/scratch", "-o/predbench/source/x"), "-oPATH is not checked"
    assert _outside(tmp_path, "/scratch", "-qo/tmp/x"), "-qoPATH is not checked"
    assert _outside(tmp_path, "/scratch", "-olink"), "-o through a symlink out of /scratch is not checked"


def test_pcsf_omega_is_added_kappa_times_not_at_most_twice(record_060, tmp_path):
    """The other half of the class: omega is added once per component (up to n times), not at most
    twice. 65 isolated selected vertices, omega = 2^47 + 1 (an integer, every number small): the
    SUM rule bounds every sum by 4 x total ~ 2^49 and calls it exact, but 65 omega ~ 2^53 + 65 is
    odd past 2^53 and rounds. Contrast: the printed value differs from the exact one."""
    n, omega = 65, 2**47 + 1
    instance = {
        "type": "PrizeCollectingSteinerForest",
        "variant": {"graph": "SimpleGraph", "weight": "f64"},
        "data": {
            "graph": {"num_vertices": n, "edges": []},
            "vertex_prizes": [0.0] * n,
            "edge_costs": [],
            "beta": 0.0,
            "omega": float(omega),
        },
    }
    printed = _evaluate(record_060.pred_path, tmp_path, instance, [1] * n)
    assert Fraction(printed.value) != n * omega  # pred's value is not the exact one
    exactness = precision(instance, 1, library_arithmetic(record_060.source_dir))
    assert not exactness.exact, exactness.why


def test_a_long_cluster_of_short_options_is_refused_and_a_short_one_checked(tmp_path):
    """Each tail of a cluster is checked as a path, so a cluster is bounded (MAX_SHORT_CLUSTER):
    past it the argument is refused whatever it holds. Contrast: the bound itself is checked, tail by tail."""
    from pytest_predbench.session.gateway import MAX_SHORT_CLUSTER, _outside

    too_long = "-" + "q" * MAX_SHORT_CLUSTER + "o/x"
    assert "short options" in _outside(tmp_path, "/scratch", too_long)
    at_bound = "-" + "q" * (MAX_SHORT_CLUSTER - 1) + "o"
    assert _outside(tmp_path, "/scratch", at_bound) is None  # letters only, no path: runs
    assert _outside(tmp_path, "/scratch", at_bound + "/predbench/source/x")  # its value outside: refused
