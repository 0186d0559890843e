"""Each option is declared once (state/flags.py): the pytest option, the plan field, the session limit
it sets, its place in the digest and the default its help quotes all come from that one declaration,
and the options table in docs/running-models.md quotes the same defaults."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.config.argparsing import Parser

from pytest_predbench import options
from pytest_predbench.run.planning import session_limits
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.state.flags import flag_of
from pytest_predbench.state.plan import UNDIGESTED_OPTIONS, PlanOptions

DOCS = Path(__file__).parents[1] / "docs" / "running-models.md"
WARNING = "ignore::pytest.PytestDeprecationWarning"  # the Parser is pytest's own, private class


def parsed(*argv: str) -> dict[str, object]:
    """The plan options a command line gives, as the plugin reads them."""
    parser = Parser()
    options.add_options(parser)
    namespace = parser.parse(list(argv))
    return options.given_plan_options(SimpleNamespace(getoption=lambda dest: getattr(namespace, dest)))


def example(field: str):
    """A value of the field's type other than its default, and how the command line spells it."""
    flag = flag_of(PlanOptions.model_fields[field])
    if flag.const is not None:
        return flag.const, []
    if flag.on_off:
        return False, ["off"]
    kind = options._value_type(field)
    if kind is list:
        return (["x.json", "y.json"], ["x.json"]) if flag.repeat else (["a", "b"], ["a, b"])
    if kind is int:
        return 977, ["977"]
    if kind is float:
        return 97.5, ["97.5"]
    if field == "fake_stop":
        return "infra_error", ["infra_error"]
    return "some-value", ["some-value"]


def test_every_plan_field_is_an_option():
    assert [field for field, _ in options.plan_flags()] == list(PlanOptions.model_fields)


@pytest.mark.filterwarnings(WARNING)
@pytest.mark.parametrize("field", list(PlanOptions.model_fields))
def test_each_option_given_on_the_command_line_reaches_its_plan_field(field):
    flag = flag_of(PlanOptions.model_fields[field])
    value, args = example(field)
    argv = [flag.name, *args]
    if flag.repeat:
        argv += [flag.name, "y.json"]
    assert parsed(*argv) == {field: value}
    assert parsed() == {}, "contrast: an option not given is not in the plan's given options"
    assert PlanOptions.model_validate(parsed(*argv)).model_dump(mode="json")[field] == value


LIMITS = {  # the test's own statement of which limit each option sets (the code's is in its Flag)
    "call_timeout": "call_timeout_s",
    "max_model_calls": "model_calls",
    "max_pred_calls": "pred_calls",
    "session_seconds": "wall_seconds",
    "command_timeout": "command_timeout_s",
    "max_output_tokens": "max_output_tokens",
    "call_retries": "call_retries",
    "prompt_cache": "prompt_cache",
    "session_memory": "memory_mib",
    "session_processes": "processes",
    "session_disk": "disk_mib",
    "session_cpu": "cpu_cores",
    "unbounded": "unbounded",
}


def test_the_limit_options_are_these():
    assert {f: flag.limit for f, flag in options.plan_flags() if flag.limit is not None} == LIMITS


@pytest.mark.parametrize("field", sorted(LIMITS))
def test_each_limit_option_sets_its_session_limit_and_nothing_else(field):
    flag = flag_of(PlanOptions.model_fields[field])
    if flag.const is not None or flag.on_off:
        value = flag.const if flag.const is not None else False
    else:
        value = flag.least + 7 if isinstance(flag.least, int) else 7.5
    limits = session_limits(PlanOptions.model_validate({field: value}), 1.0)
    assert getattr(limits, LIMITS[field]) == value
    default = SessionLimits(dollars=1.0)
    assert getattr(default, LIMITS[field]) != value, "contrast: the default is another value"
    changed = {k for k, v in limits.model_dump().items() if v != default.model_dump()[k]}
    assert changed == {LIMITS[field]}


def test_a_limit_option_below_its_least_is_refused_naming_the_option():
    from pytest_predbench.state.plan import PlanError

    with pytest.raises(PlanError, match=r"^--session-memory must be a whole number, 64 or more; got 63$"):
        session_limits(PlanOptions(session_memory=63), 1.0)
    with pytest.raises(PlanError, match=r"^--session-seconds must be a positive number of seconds, got 0.0$"):
        session_limits(PlanOptions(session_seconds=0.0), 1.0)
    assert session_limits(PlanOptions(session_memory=64), 1.0).memory_mib == 64, "contrast: the least itself is fine"


def test_the_digest_leaves_out_exactly_the_options_declared_outside_it():
    assert UNDIGESTED_OPTIONS == {"bug_pool", "run_name"}
    declared = {f for f, flag in options.plan_flags() if not flag.digest}
    assert UNDIGESTED_OPTIONS == declared


@pytest.mark.filterwarnings(WARNING)
def test_each_help_quotes_the_default_the_code_uses():
    parser = Parser()
    options.add_options(parser)
    helps = {opt.names()[0]: opt.attrs()["help"] for opt in parser.getgroup("predbench").options}
    for field, flag in options.plan_flags():
        if "{default" not in flag.help:
            continue
        assert flag.help.format(default=options.plan_default(field, flag)) == helps[flag.name]
    assert "(default 200)" in helps["--max-pred-calls"], "SessionLimits().pred_calls is 200"
    assert SessionLimits().pred_calls == 200


def documented_defaults() -> dict[str, str]:
    """Flag -> the default docs/running-models.md's options table gives it, where it gives one value."""
    found = {}
    for line in DOCS.read_text().splitlines():
        row = re.match(r"\| `(--[a-z-]+)[^`]*`[^|]* \| (.*) \|$", line)
        if row:
            value = re.search(r"\(default (on|off|[0-9.]+)\b", row.group(2))
            if value:
                found[row.group(1)] = value.group(1)
    return found


def test_the_docs_table_quotes_the_defaults_the_code_uses():
    documented = documented_defaults()
    assert "--max-pred-calls" in documented and "--session-memory" in documented, documented
    for field, flag in options.plan_flags():
        if flag.name not in documented or "{default" not in flag.help:
            continue
        code = options.plan_default(field, flag)
        assert float(documented[flag.name]) == float(code) if not flag.on_off else documented[flag.name] == code, (
            f"{flag.name}: the docs say {documented[flag.name]}, the code {code}"
        )
    for flag in options.INVOCATION_FLAGS:
        if flag.name in documented and flag.default not in (None, False, True):
            assert float(documented[flag.name]) == float(flag.default), flag.name
