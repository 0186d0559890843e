"""A certificate names one rule; one that names none is told so at submission (verify/graph.py).

A real model lost crash certificates: a crash's target has no bundle to copy, the model guessed
its variant, the shape check called the file well-formed, and the verifier rejected it after the
session ("Reduction bundles require witness-capable paths"). Now the channel says at once that the
two variants name no rule, which variants pred's rules from that source do reach, and the command
that prints one as JSON; the certificate is still verified, never dropped on the hint's word.

All against the real pred's own listing (`pred list --rules --json`), which is also the one count of
rules: versions/<V>/version.json's `rules` must be what the binary lists.
"""

import copy
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_predbench.session.submission import Spool
from pytest_predbench.verify import pin
from pytest_predbench.verify.graph import ListingError, RuleTable, read_listing, rule_table, spec
from pytest_predbench.verify.verifier import verify_text
from tests.support.sandboxes import session_channel
from tests.support.versions import CALIBRATION_DIR, TEST_VERSION

CRASH = json.loads((CALIBRATION_DIR / "genuine_kcoloring_to_cliques_crash.json").read_text())
"""A genuine crash while reducing (pred 0.5.0): its target is `{"type", "variant"}` with no data."""


@pytest.fixture(scope="module")
def table(env_record) -> RuleTable:
    return rule_table(Path(env_record.pred_path))


def show(env_record, name: str) -> dict:
    done = subprocess.run([env_record.pred_path, "show", name, "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wrong_variant(cert: dict) -> dict:
    """`cert` with its target's graph guessed: a variant of no rule from its source."""
    changed = copy.deepcopy(cert)
    assert "graph" in changed["target"]["variant"]
    changed["target"]["variant"]["graph"] = "KingsSubgraph"
    return changed


@pytest.mark.parametrize("version", pin.supported())
def test_the_one_count_of_rules_is_what_pred_lists(version):
    listed = rule_table(pin.pred_binary(version))
    assert listed.count == pin.facts(version).rules
    assert len({(r.source, r.target) for r in listed.rules}) == listed.count, "each rule listed once"


def test_a_listing_that_disagrees_with_itself_is_refused():
    with pytest.raises(ListingError, match="says 3 rules but lists 1"):
        read_listing(json.dumps({"num_rules": 3, "rules": [{"source": "A", "target": "B"}]}))
    with pytest.raises(ListingError, match="no rule listing"):
        read_listing("not json")


def test_a_genuine_crash_names_its_rule_and_a_guessed_variant_does_not(table, env_record):
    source, target = CRASH["source"], CRASH["target"]
    assert table.names_no_rule(spec(source["type"], source["variant"]), spec(target["type"], target["variant"])) is None
    guessed = wrong_variant(CRASH)
    hint = table.names_no_rule(
        spec(source["type"], source["variant"]), spec(target["type"], guessed["target"]["variant"])
    )
    assert hint is not None and spec(target["type"], target["variant"]) in hint, hint


def test_the_documented_command_gives_a_crash_targets_exact_variant(env_record):
    """The prompt's way: `pred show SOURCE/VARIANT --json` lists the source's rules with exact variants."""
    source, target = CRASH["source"], CRASH["target"]
    shown = show(env_record, spec(source["type"], source["variant"]))
    targets = [edge["target"] for edge in shown["reduces_to"]]
    assert {"name": target["type"], "variant": target["variant"]} in targets


def test_the_verifier_rejects_a_guessed_variant_with_the_variant_to_name(table, env_record):
    verdict = verify_text(json.dumps(wrong_variant(CRASH)), env_record)
    assert not verdict.accepted and "no one-step rule" in verdict.reason
    assert spec(CRASH["target"]["type"], CRASH["target"]["variant"]) in verdict.reason, verdict.reason
    contrast = verify_text(json.dumps(CRASH), env_record)
    assert contrast.accepted, contrast.reason


def test_the_spool_tells_a_certificate_naming_no_rule_and_keeps_it(table, tmp_path):
    spool = Spool(tmp_path / "spool", table)
    (spool.dir / "1.json").write_text(json.dumps(wrong_variant(CRASH)))
    (guessed,) = spool.collect()
    assert guessed.certificate is not None and "name no rule" in guessed.message(), guessed.message()
    assert len(spool.accepted) == 1, "still verified: the hint is no verdict"
    (spool.dir / "2.json").write_text(json.dumps(CRASH))
    (named,) = spool.collect()
    assert named.certificate is not None and named.hint is None and "no rule" not in named.message()


def test_a_session_channel_knows_its_preds_rules(env_record, tmp_path):
    sandbox, spool = session_channel(env_record, tmp_path)
    try:
        assert spool.rules is not None and spool.rules.count == pin.facts(TEST_VERSION).rules
    finally:
        sandbox.close()


def test_names_the_table_does_not_hold_as_types_get_no_hint(table):
    """pred reads aliases (MVC) and names in any case; the table shows canonical names only, so it
    says nothing about them rather than something wrong."""
    rule = table.rules[0]
    assert table.names_no_rule("MVC/SimpleGraph/One", rule.target) is None
    assert table.names_no_rule(rule.source, "NoSuchProblem/x") is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_rule_is_named_and_every_hint_points_at_a_rule(table, data):
    """Drawn at random from pred's own listing: a rule gets no hint; a source joined to any variant of a
    type it does not reach by that variant gets one, and the variant the hint offers first names a rule."""
    rule = data.draw(st.sampled_from(table.rules))
    assert table.names_no_rule(rule.source, rule.target) is None
    target_type = rule.target.split("/")[0]
    variants = sorted({n for r in table.rules for n in (r.source, r.target) if n.split("/")[0] == target_type})
    other = data.draw(st.sampled_from(variants))
    source = data.draw(st.sampled_from(sorted({r.source for r in table.rules})))
    hint = table.names_no_rule(source, other)
    joined = any(r.source == source and r.target == other for r in table.rules)
    assert (hint is None) is joined
    if hint and "`pred show " in hint:
        offered = hint.split("`pred show ", 1)[1].split(" ", 1)[0]
        if "reach" in hint:  # a target variant: it names a rule from this source
            assert table.names_no_rule(source, offered) is None, (source, offered, hint)
        elif "start at" in hint:  # a source variant: it has a rule to the target's type
            assert any(r.source == offered and r.target.split("/")[0] == target_type for r in table.rules), hint


@pytest.mark.parametrize("version", pin.supported())
def test_the_slash_listing_is_preds_exact_variants(version):
    """The table compares slash names; `pred show SOURCE --json` gives every rule's variants as JSON.
    For every source the two agree, so a certificate's variant written as `spec` writes it is
    compared with exactly the variants pred's rules have (the order of a variant's values is its keys')."""
    binary = pin.pred_binary(version)
    listed = rule_table(binary)
    for source in sorted({r.source for r in listed.rules}):
        done = subprocess.run([str(binary), "show", source, "--json"], capture_output=True, text=True, timeout=60)
        shown = json.loads(done.stdout)
        assert spec(shown["name"], shown["variant"]) == source
        targets = {spec(edge["target"]["name"], edge["target"]["variant"]) for edge in shown["reduces_to"]}
        assert targets == {r.target for r in listed.rules if r.source == source}, source
