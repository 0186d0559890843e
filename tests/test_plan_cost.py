"""`predbench plan` prices a plan of provider models with no key and no call (issue 32): the
caps it prints are the plan's, and the budget it names when a cap affords too few calls is one that
affords them (the contrast: planned with that budget, the note is gone)."""

import os
import re
import subprocess
import sys

from tests.support.acceptance import REPO

MODELS = "openai/gpt-4o-mini,anthropic/claude-sonnet-4-5"


def plan(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}  # any call would fail
    return subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "plan", *args], capture_output=True, text=True, cwd=REPO, env=env
    )


def test_a_plan_of_two_provider_models_is_priced_without_a_key_or_a_call():
    result = plan("--models", MODELS, "--sessions", "3", "--budget", "0.2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "plan"]
    assert lines[-1].startswith("plan: at most $0.20, typical $")
    named = re.search(r"--session-budget ([\d.]+) would afford them all \(--budget ([\d.]+) for 3", lines[1])
    assert named, lines[1]  # $0.033 a session cannot pay for Sonnet's first call: the line says what would
    enough = plan("--models", MODELS, "--sessions", "3", "--budget", named[2])
    assert enough.returncode == 0 and "would afford" not in enough.stdout.splitlines()[1], enough.stdout


def test_a_model_without_a_price_is_one_line():
    result = plan("--models", "nope/xyz", "--sessions", "3")
    assert result.returncode == 2 and result.stderr.startswith("predbench: error: model 'nope/xyz' is not in")
    assert len(result.stderr.splitlines()) == 1
