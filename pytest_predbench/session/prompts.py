"""The session prompt: the same templates for every model, identified by one hash.

The hash goes into every plan and session record, so a run can prove that all models
saw the identical prompt. It covers the templates and the constants rendered into them (the
limits they render are in the plan already). Reading it never imports the agent stack.
"""

import hashlib
import math
from functools import cache
from pathlib import Path

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


BRUTE_FORCE_CONFIGS_PER_SECOND = 2.0e6
"""pred 0.5.0's brute force, configurations per second, as the prompt states it: well below the
3.6 million that `python -m benchmarks.brute_force_reach` measures on a quiet 2-core machine,
because sessions run side by side (it measured 1.4 million at load average 8, where the size this
gives still solved within the command timeout). The prompt must not promise more than a model gets."""


def brute_force_reach(command_timeout_s: float) -> dict[str, object]:
    """What the prompt says brute force solves within the command timeout (template variables)."""
    configs = BRUTE_FORCE_CONFIGS_PER_SECOND * command_timeout_s
    return {
        "brute_force_rate": f"{BRUTE_FORCE_CONFIGS_PER_SECOND / 1e6:g}",
        "brute_force_binary": math.floor(math.log2(configs)),
        "brute_force_ternary": math.floor(math.log(configs, 3)),
    }
