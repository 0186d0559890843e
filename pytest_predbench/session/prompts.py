"""The session prompt: the same templates for every model, identified by one hash.

The hash goes into every plan and session record, so a run can prove that all models
saw the identical prompt. It covers the templates and the constants rendered into them (the
limits they render are in the plan already). Reading it never imports the agent stack.
"""

import hashlib
from functools import cache
from pathlib import Path

from pytest_predbench.verify.reach import BRUTE_FORCE_CONFIGS_PER_SECOND, brute_force_reach

__all__ = ["BRUTE_FORCE_CONFIGS_PER_SECOND", "brute_force_reach", "prompt_hash", "template"]

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
TEMPLATE_NAMES = ("system.j2", "instance.j2")


def template(name: str) -> str:
    return (PROMPT_DIR / name).read_text(encoding="utf-8")


@cache
def prompt_hash() -> str:
    digest = hashlib.sha256()
    for name in TEMPLATE_NAMES:
        digest.update(name.encode() + b"\0" + template(name).encode() + b"\0")
    digest.update(f"brute_force_configs_per_second={BRUTE_FORCE_CONFIGS_PER_SECOND!r}\0".encode())
    return digest.hexdigest()
