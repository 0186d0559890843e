"""A session's trajectory as steps a person reads: what the model said, the command it ran, what came
back, and the harness line that ended the observation.

Three runners write three shapes, all read here and nowhere else:

- mini-swe-agent's own (`trajectory_format` "mini-swe-agent-1.1": `messages`, the model's tool calls
  and the observations; `mini-extra inspector FILE` opens the same file in a terminal);
- the baseline's (`steps`: each probe command, its pred calls and what the probe said);
- the FAKE runner's one line (`{"fake": true}`: no steps, it called no model).

A trajectory is read as untrusted input (bounded, validated by hand): a missing, damaged or foreign
file gives a note saying so, never an exception, so one bad file cannot stop a report.
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_predbench.files import read_untrusted

MAX_TRAJECTORY_BYTES = 64 * 1024**2
HARNESS = re.compile(
    r"\[harness\] used (?P<model>\d+)/\d+ model calls, (?P<pred>\d+)/\d+ pred calls, \$(?P<dollars>[\d.]+)/"
)


@dataclass
class Step:
    """One step: the model's message (or the baseline's command), what ran, what came back."""

    n: int
    message: str = ""
    """What the model said before acting (empty for the baseline)."""
    commands: list[str] = field(default_factory=list)
    observation: str = ""
    returncode: int | None = None
    harness: str = ""
    """The harness line that ended the observation (what was used of each limit)."""
    pred_calls: int | None = None
    """pred calls this step made (from the harness lines, or the baseline's count)."""
    notes: list[str] = field(default_factory=list)
    """What the submission channel answered, a timeout, the probe's summary."""


@dataclass
class Trajectory:
    kind: str
    """'mini-swe-agent', 'baseline', 'fake', or 'missing' / 'unreadable'."""
    steps: list[Step] = field(default_factory=list)
    exit_status: str = ""
    note: str = ""


def read_trajectory(path: Path | None) -> Trajectory:
    if path is None or not path.is_file():
        return Trajectory("missing", note="the run kept no trajectory for this session")
    try:
        data = json.loads(read_untrusted(path, MAX_TRAJECTORY_BYTES))
    except (OSError, ValueError, RecursionError) as exc:
        return Trajectory("unreadable", note=f"{path.name} cannot be read as JSON: {exc}")
    if not isinstance(data, dict):
        return Trajectory("unreadable", note=f"{path.name} is not a trajectory object")
    if data.get("fake"):
        return Trajectory("fake", note="FAKE runner: no model was called, so there are no steps")
    if isinstance(data.get("steps"), list):
        return _baseline(data["steps"])
    if isinstance(data.get("messages"), list):
        return _mini_swe(data)
    return Trajectory("unreadable", note=f"{path.name}: not a trajectory predbench knows")


def _text(content: object) -> str:
    """A message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _commands(message: dict) -> list[str]:
    extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
    actions = extra.get("actions") if isinstance(extra.get("actions"), list) else []
    return [str(a.get("command", "")) for a in actions if isinstance(a, dict)]


def _harness(text: str) -> tuple[str, str]:
    """(observation without its harness line, the harness line)."""
    lines = text.rstrip().splitlines()
    if lines and lines[-1].startswith("[harness]"):
        return "\n".join(lines[:-1]), lines[-1]
    return text, ""


def _mini_swe(data: dict) -> Trajectory:
    found = Trajectory("mini-swe-agent")
    step: Step | None = None
    pred_before = 0
    for message in data["messages"]:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        if role == "assistant":
            step = Step(n=len(found.steps) + 1, message=_text(message.get("content")), commands=_commands(message))
            found.steps.append(step)
        elif role in ("tool", "user") and step is not None:
            raw = extra.get("raw_output")
            observation, harness = _harness(_text(message.get("content")))
            step.observation += raw if isinstance(raw, str) else observation
            step.returncode = extra.get("returncode") if isinstance(extra.get("returncode"), int) else None
            if extra.get("exception_info"):
                step.notes.append(str(extra["exception_info"]))
            if harness:
                step.harness = harness
                match = HARNESS.search(harness)
                if match:
                    step.pred_calls = int(match["pred"]) - pred_before
                    pred_before = int(match["pred"])
        elif role == "exit":
            found.exit_status = str(extra.get("exit_status") or _text(message.get("content")))
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    found.exit_status = found.exit_status or str(info.get("exit_status", ""))
    return found


def _baseline(steps: list) -> Trajectory:
    found = Trajectory("baseline")
    for n, raw in enumerate((s for s in steps if isinstance(s, dict)), 1):
        said = raw.get("said")
        notes = [str(r) for r in raw.get("receipts", []) if r]
        if raw.get("timed_out"):
            notes.append("timed out")
        if isinstance(said, dict):
            notes.append("probe: " + json.dumps(said, sort_keys=True)[:2000])
        found.steps.append(
            Step(
                n=n,
                commands=[str(raw.get("command", ""))],
                observation=str(raw.get("output", "")),
                returncode=raw.get("returncode") if isinstance(raw.get("returncode"), int) else None,
                pred_calls=raw.get("pred_calls") if isinstance(raw.get("pred_calls"), int) else None,
                notes=notes,
            )
        )
    return found


def recorded_steps(run, record) -> int | None:
    """How many steps the trajectory of an item's record holds (None: the run kept none): the
    `steps` column of the session table (report/columns.py). `run` is the record's RunDir."""
    relative = record.result.trajectory_path if record is not None and record.result else None
    if not relative:
        return None
    trajectory = read_trajectory(run.inside(relative))
    return None if trajectory.kind in ("missing", "unreadable") else len(trajectory.steps)
