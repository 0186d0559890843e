"""The session prompt: the same templates for every model, identified by one hash per pred version.

The hash goes into every plan and session record, so a run can prove that all models
saw the identical prompt. It covers the templates, the constants rendered into them (the
limits they render are in the plan already) and the version's own prompt facts
(versions/<V>/version.json `prompt_facts`, rendered as a list into instance.j2): two versions
give two prompts, so two hashes. Reading it never imports the agent stack.
"""

import hashlib
from functools import cache
from pathlib import Path

from pytest_predbench.session.gateway import REFUSED_EXIT
from pytest_predbench.verify import pin
from pytest_predbench.verify.reach import BRUTE_FORCE_CONFIGS_PER_SECOND, brute_force_reach

__all__ = ["BRUTE_FORCE_CONFIGS_PER_SECOND", "brute_force_reach", "prompt_facts", "prompt_hash", "template"]

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
TEMPLATE_NAMES = ("system.j2", "instance.j2")


def template(name: str) -> str:
    return (PROMPT_DIR / name).read_text(encoding="utf-8")


def prompt_facts(version: str) -> list[str]:
    """What the prompt says of this pred version alone (the template's `prompt_facts`)."""
    return list(pin.facts(version).prompt_facts)


def prompt_hash(version: str) -> str:
    """The hash of the prompt a session on `version` sees."""
    return _prompt_hash(version)


@cache
def _prompt_hash(version: str) -> str:
    digest = hashlib.sha256(f"pred_version={version}\0".encode())
    for name in TEMPLATE_NAMES:
        digest.update(name.encode() + b"\0" + template(name).encode() + b"\0")
    digest.update(f"brute_force_configs_per_second={BRUTE_FORCE_CONFIGS_PER_SECOND!r}\0".encode())
    digest.update(f"refused_exit={REFUSED_EXIT}\0".encode())
    for fact in prompt_facts(version):
        digest.update(b"fact\0" + fact.encode() + b"\0")
    return digest.hexdigest()
