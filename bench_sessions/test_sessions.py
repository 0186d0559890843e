"""The benchmark: one item per (model, session), parametrized by the predbench plugin.

    pytest bench_sessions -n 8 --models a,b --sessions 3 --budget 0.2

Before an item runs the plugin reserves its budget (or skips it with reason "budget");
after it, the plugin records the outcome and settles the spend. The test itself only runs
the session and asserts every certificate it submitted through the independent verifier:
passed means every certificate was accepted (none at all included), failed means a false
alarm, and an infrastructure failure is reported apart as INFRA, never as "found no bugs".
"""


def test_session(bench_session):
    bench_session.run()
    verdicts = bench_session.verify()
    false_alarms = [v.reason for v in verdicts if v.rejected]  # inconclusive is not the model's
    assert not false_alarms, (
        f"{len(false_alarms)} of {len(verdicts)} certificate(s) rejected: {'; '.join(false_alarms)}"
    )
