"""Every command the README and docs/ show is one a user can type: its program, subcommand, flags,
make target, module and repository paths exist, and the verifier's sample session is run for real.

A copy-paste error in the front door (a flag renamed, a path without its version folder) costs a
researcher their first half hour; this is the test that notices first. Commands are taken from the
fenced code blocks (untagged or shell), one per line after joining `\\` continuations, split at `&&`.
`predbench` commands are parsed by predbench's own argument parser (a flag it lacks is an error);
`pytest` flags must be among those `pytest --help` lists with the plugin loaded; `make` targets must be
in the Makefile; `python -m` modules must import. Every ```toml block (a model-settings file) loads,
its commented-out optional settings included, and together they show every setting there is.
"""

import argparse
import contextlib
import io
import re
import shlex
import subprocess
import sys
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest

from pytest_predbench.cli import build_parser
from tests.support.acceptance import REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_KINDS = ("", "bash", "sh", "shell", "console")
"""The info strings of the fenced blocks that hold commands (untagged or shell)."""
PROGRAMS = ("make", "pytest", "predbench", "python")
PLACEHOLDER = re.compile(r"\[[^\]]*\]|<[^>]*>")
"""Optional or named parts a reader fills in (`[reports/<run id>]`): left out before parsing."""


def fenced_blocks(text: str, kinds: tuple[str, ...]) -> list[str]:
    """The bodies of `text`'s fenced blocks whose info string is one of `kinds`, fences paired in order
    (a closing fence is never taken for an opening one, so a block after a ```python block is found)."""
    blocks: list[str] = []
    body: list[str] | None = None
    kind = ""
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if body is None:
                kind, body = line[3:].strip(), []
            else:
                if kind in kinds:
                    blocks.append("".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return blocks


def shell_blocks(text: str) -> list[str]:
    return fenced_blocks(text, SHELL_KINDS)


def commands(document: Path) -> list[list[str]]:
    """The commands in `document`'s shell blocks, each as argv with its leading `$ ` and `.venv/bin/` dropped."""
    found = []
    for block in shell_blocks(document.read_text(encoding="utf-8")):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = PLACEHOLDER.sub("", line.strip().removeprefix("$ ").split("  #")[0].split(" # ")[0])
            if line.removeprefix(".venv/bin/").split(" ")[0] not in PROGRAMS:
                continue  # output, or a command of no program of ours
            for part in line.split("&&"):
                argv = shlex.split(part.replace('"$STORE"', "postgresql://x/y"))
                if argv:
                    argv[0] = argv[0].removeprefix(".venv/bin/")
                if argv and argv[0] in PROGRAMS:
                    found.append(argv)
    return found


CASES = [(doc, argv) for doc in DOCUMENTS for argv in commands(doc)]


def test_the_documents_show_commands_of_every_program():
    programs = {argv[0] for _, argv in CASES}
    assert {"make", "pytest", "predbench"} <= programs, programs
    assert len(CASES) >= 20  # the extraction found the blocks (a broken pattern would find none)


@cache
def pytest_flags() -> frozenset[str]:
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][\w-]*|-n)\b", shown))


def check(argv: list[str]) -> str | None:
    """Why `argv` is not a command a user could type here, or None."""
    program, *args = argv
    if program == "make":
        targets = set(re.findall(r"^([\w.-]+):", (REPO / "Makefile").read_text(), re.M))
        missing = [t for t in args if t not in targets]
        return f"no make target {missing}" if missing else None
    if program == "python":
        module = args[args.index("-m") + 1] if "-m" in args else None
        return None if module is None or find_spec(module) else f"no module {module}"
    if program == "pytest":
        flags = [a.split("=")[0] for a in args if a.startswith("-")]
        missing = [f for f in flags if f not in pytest_flags()]
        if missing:
            return f"pytest has no {missing}"
        first = args[0] if args and not args[0].startswith("-") else None
        return f"no test path {first}" if first and not (REPO / first).exists() else None
    # predbench: its own parser decides (an unknown subcommand or flag exits 2)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return stderr.getvalue().strip().splitlines()[-1]
    except argparse.ArgumentError as exc:
        return str(exc)
    files = [a for a in args if a.startswith("fixtures/")]
    absent = [f for f in files if not (REPO / f).exists()]
    return f"no such file {absent}" if absent else None


@pytest.mark.parametrize(("document", "argv"), CASES, ids=[f"{d.name}:{' '.join(a)[:60]}" for d, a in CASES])
def test_a_documented_command_is_one_a_user_can_type(document: Path, argv: list[str]):
    assert check(argv) is None, f"{document.name}: {shlex.join(argv)}: {check(argv)}"


@pytest.mark.parametrize(
    "argv",
    [
        ["predbench", "report", "--no-such-flag"],
        ["predbench", "no-such-command"],
        ["pytest", "bench_sessions", "--no-such-flag"],
        ["pytest", "bench_session", "-n", "2"],
        ["make", "no-such-target"],
        ["python", "-m", "benchmarks.no_such_script"],
        ["predbench", "verify", "fixtures/calibration/genuine_mvc_to_ensemble_suboptimal.json"],
    ],
)
def test_the_check_refuses_what_a_user_could_not_type(argv: list[str]):
    """The contrast: a flag, command, target, module or path that does not exist is named."""
    assert check(argv) is not None


def test_a_shell_block_after_a_python_block_is_found_and_the_python_is_not():
    """The old pattern took a ```python block's closing fence for an opening one: the prose after it
    became a 'block' and the shell block after that was never checked (docs/leaderboard.md's)."""
    text = "```python\nimport predbench\n```\n\nprose\n\n```\npredbench runs --html\n```\n\n```toml\nx = 1\n```\n"
    assert shell_blocks(text) == ["predbench runs --html\n"]


def sample_session(document: Path) -> tuple[list[str], list[str], int]:
    """The `$ predbench verify` sample in `document`: its argv, the verdict word of each output line, its exit."""
    block = next(b for b in shell_blocks(document.read_text()) if b.startswith("$ predbench verify"))
    lines = block.splitlines()
    argv = shlex.split(lines[0].removeprefix("$ "))
    verdicts = [line.split()[0] for line in lines[1:] if line.split()[0] in ("ACCEPTED", "REJECTED", "INCONCLUSIVE")]
    exit_code = int(lines[lines.index("$ echo $?") + 1])
    return argv, verdicts, exit_code


@pytest.mark.slow
def test_the_verifier_sample_session_prints_what_the_docs_show(env_record):
    argv, verdicts, exit_code = sample_session(REPO / "docs" / "verifier.md")
    assert verdicts, "the sample shows no verdicts"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", *argv[1:]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    shown = [line.split()[0] for line in proc.stdout.splitlines() if line.split()[:1] in (["ACCEPTED"], ["REJECTED"])]
    assert (shown, proc.returncode) == (verdicts, exit_code), proc.stdout + proc.stderr


def toml_blocks(text: str) -> list[str]:
    """The bodies of `text`'s ```toml blocks, their commented-out optional settings (`# key = value`) set."""
    return [re.sub(r"^# (\w+ = )", r"\1", block, flags=re.M) for block in fenced_blocks(text, ("toml",))]


TOML_CASES = [(doc, block) for doc in DOCUMENTS for block in toml_blocks(doc.read_text(encoding="utf-8"))]


def load_documented(block: str, where: Path):
    """`block` loaded as a model-settings file in `where`, the demo scripts it names made there."""
    from pytest_predbench.session.model_settings import load_settings

    for script in re.findall(r'demo_script = "([^"]+)"', block):
        (where / script).parent.mkdir(parents=True, exist_ok=True)
        (where / script).write_text('{"turns": [{"say": "done"}]}')
    (where / "models.toml").write_text(block)
    return load_settings(where / "models.toml")


@pytest.mark.parametrize(("document", "block"), TOML_CASES, ids=[f"{d.name}:{b[:30]}" for d, b in TOML_CASES])
def test_every_documented_model_settings_file_loads_with_every_optional_setting(document, block, tmp_path):
    models = load_documented(block, tmp_path)
    named = re.findall(r'^\[models\."([^"]+)"\]', block, re.M)
    assert named and all(models[name].priced for name in named), f"{document.name}: {block}"


def test_the_documented_settings_are_all_checked_and_a_misspelt_one_is_refused(tmp_path):
    from pytest_predbench.session.model_settings import ModelEntry, SettingsError

    shown = {key for _, block in TOML_CASES for key in re.findall(r"^(\w+) = ", block, re.M)}
    assert set(ModelEntry.model_fields) <= shown, f"settings no document shows: {set(ModelEntry.model_fields) - shown}"
    with pytest.raises(SettingsError, match="extra_kwarg"):  # the contrast: a setting that does not exist
        load_documented(
            '[models."x"]\ninput_cost_per_token = 1e-6\noutput_cost_per_token = 1e-6\nextra_kwarg = {}\n', tmp_path
        )
