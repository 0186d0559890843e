"""Trajectories read as steps for the session pages and steps_df: mini-swe-agent's own format, the
baseline's, the FAKE runner's, and files that are missing, damaged or foreign (a note, never an
exception)."""

import json

from pytest_predbench.report.trajectory import read_trajectory


def harness(model: int, pred: int, dollars: float) -> str:
    return (
        f"[harness] used {model}/60 model calls, {pred}/150 pred calls, ${dollars:.4f}/$0.5000; 1700 s of 1800 s left"
    )


def tool(raw: str, line: str, returncode: int = 0) -> dict:
    content = f"<returncode>{returncode}</returncode>\n<output>\n{raw}</output>\n{line}"
    return {
        "role": "tool",
        "content": content,
        "tool_call_id": "c",
        "extra": {"raw_output": raw, "returncode": returncode},
    }


def assistant(say: str, command: str) -> dict:
    return {"role": "assistant", "content": say, "extra": {"actions": [{"command": command, "tool_call_id": "c"}]}}


def test_a_mini_swe_agent_trajectory_reads_as_its_steps(tmp_path):
    messages = [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": "task"},
        assistant("List the rules.", "pred list --rules"),
        tool("rule table\n" * 40, harness(1, 1, 0.002)),
        assistant("Reduce it.", "pred reduce a.json --to B && pred solve b.json"),
        tool("{}", harness(2, 3, 0.004), returncode=1),
        {"role": "exit", "content": "done", "extra": {"exit_status": "Submitted"}},
    ]
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps({"messages": messages, "trajectory_format": "mini-swe-agent-1.1", "info": {}}))
    found = read_trajectory(path)
    assert found.kind == "mini-swe-agent" and found.exit_status == "Submitted"
    assert [(s.n, s.message, s.commands) for s in found.steps] == [
        (1, "List the rules.", ["pred list --rules"]),
        (2, "Reduce it.", ["pred reduce a.json --to B && pred solve b.json"]),
    ]
    first, second = found.steps
    assert first.observation == "rule table\n" * 40 and first.harness == harness(1, 1, 0.002)
    assert (first.pred_calls, second.pred_calls, second.returncode) == (1, 2, 1)  # from the harness lines


def test_a_baseline_trajectory_reads_as_its_commands(tmp_path):
    steps = [
        {"command": "predbench-probe catalogue x", "returncode": 0, "seconds": 1.0, "pred_calls": 1, "said": None},
        {
            "command": "predbench-probe rule --index 3",
            "returncode": 0,
            "seconds": 9.0,
            "pred_calls": 12,
            "said": {"rule": "A -> B", "tried": 6},
            "receipts": ["[harness] certificate 1 received"],
        },
    ]
    path = tmp_path / "b.traj.json"
    path.write_text(json.dumps({"runner": "baseline", "steps": steps}))
    found = read_trajectory(path)
    assert found.kind == "baseline" and [s.pred_calls for s in found.steps] == [1, 12]
    assert found.steps[1].commands == ["predbench-probe rule --index 3"]
    assert found.steps[1].notes[0] == "[harness] certificate 1 received" and "A -> B" in found.steps[1].notes[1]


def test_fake_missing_and_damaged_trajectories_give_a_note_not_an_exception(tmp_path):
    fake = tmp_path / "f.json"
    fake.write_text(json.dumps({"fake": True, "model": "m/a"}))
    broken = tmp_path / "broken.json"
    broken.write_text('{"messages": [')
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"something": "else"}))
    assert (read_trajectory(fake).kind, read_trajectory(fake).steps) == ("fake", [])
    assert read_trajectory(tmp_path / "absent.json").kind == "missing"
    assert read_trajectory(None).kind == "missing"
    assert read_trajectory(broken).kind == "unreadable" and "cannot be read as JSON" in read_trajectory(broken).note
    assert read_trajectory(foreign).kind == "unreadable"
