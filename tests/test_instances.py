"""The arithmetic of instances (verify/instances.py): which problems wrap at 2^31, and which instances'
numbers leave room for pred's sums. How exact an evaluation is, for "equal" and "strictly better", is
verify/exactness.py's (tests/test_exactness.py).
"""

import re
from pathlib import Path

from pytest_predbench.verify.environment import locate_library_source
from pytest_predbench.verify.instances import I32_VALUED, arithmetic_problem
from tests.support.versions import TEST_VERSION


def _value_types(source: Path) -> dict[str, str]:
    """Problem name -> the value type its `impl Problem` declares, from the library's source."""
    found = {}
    for path in sorted((source / "src" / "models").rglob("*.rs")):
        text = path.read_text()
        for block in re.finditer(r'const NAME: &(?:\'static )?str = "(\w+)";\s*type Value = ([^;]+);', text):
            found[block.group(1)] = block.group(2).replace("crate::types::", "")
    return found


def test_the_tables_match_the_pinned_librarys_value_types():
    """I32_VALUED is every problem whose value is an i32 whatever its variant. Read from the library, so
    a new version that adds one fails here rather than escaping the bound. (How exact a float value is
    is derived from the same source at run time: tests/test_exactness.py.)"""
    source = locate_library_source(TEST_VERSION)
    assert source, "the library's source (cargo's registry) is needed: run `make setup`"
    types = _value_types(source)
    assert len(types) > 150, "the parse found the problems"
    assert {name for name, value in types.items() if re.fullmatch(r"(Min|Max)<i32>", value)} == I32_VALUED


def test_a_problem_computed_as_i32_without_an_i32_tag_is_bounded():
    """Factoring has no variant at all, but casts its distance to i32: a target past 2^31 wraps (2^32 + 1
    factored as 1 x 1 is at distance 2^32, which is 0 as an i32)."""
    factoring = {"type": "Factoring", "variant": {}, "data": {"m": 2, "n": 2, "target": 2**32 + 1}}
    assert "wraps past 2^31 - 1" in arithmetic_problem(factoring, "source")
    assert arithmetic_problem({**factoring, "data": {"m": 2, "n": 2, "target": 15}}, "source") is None
