"""How far pred's brute force reaches: what the session prompt promises the agent, and the
verifier's own limits, both derived from the one figure here so that they cannot drift apart.

The prompt tells the agent that brute force handles about BRUTE_FORCE_CONFIGS_PER_SECOND × its
command timeout configurations within that timeout (session/prompts.py renders it). A search the
agent can run, the verifier must be able to repeat: pred's solvers run on one thread (brute force
has no parallelism, HiGHS is set to one thread), so a search that finished within the command
timeout used at most that many seconds of CPU. The verifier gives each call VERIFIER_MARGIN times
the CPU time the promised search takes at the promised rate, as a CPU-time limit (RLIMIT_CPU):
the machine's load slows a call down but never spends its CPU time, so load cannot decide a
verdict. The wall-clock limit is only a backstop against a call that waits instead of computing,
set WALL_PER_CPU times higher. What a call still cannot finish is `inconclusive` (verify/verdict.py),
and a report verifies it again with RETRY_FACTOR times the limits.
"""

import math

from pytest_predbench.verify.pred import PredLimits

BRUTE_FORCE_CONFIGS_PER_SECOND = 2.0e6
"""pred 0.5.0's brute force, configurations per second, as the prompt states it: well below the
3.6 million that `python -m benchmarks.brute_force_reach` measures on a quiet 2-core machine,
because sessions run side by side (it measured 1.4 million at load average 8, where the size this
gives still solved within the command timeout). The prompt must not promise more than a model gets."""
COMMAND_TIMEOUT_S = 60.0
"""The default timeout of each of the agent's shell commands (SessionLimits.command_timeout_s)."""
VERIFIER_MARGIN = 2.0
"""CPU time of each verifier call, in units of the promised search's time at the promised rate."""
WALL_PER_CPU = 10.0
"""The wall-clock backstop per second of CPU time: a call at load average 10 on one core still ends
on its CPU limit, not on the clock."""
RETRY_FACTOR = 4.0
"""How much longer the limits of a report's second try at an inconclusive verification are."""
MEMORY_BYTES = 2 * 1024**3
FILE_SIZE_BYTES = 64 * 1024**2


def promised_configurations(command_timeout_s: float = COMMAND_TIMEOUT_S) -> float:
    """The size of the search the prompt tells the agent it can run within one command."""
    return BRUTE_FORCE_CONFIGS_PER_SECOND * command_timeout_s


def brute_force_reach(command_timeout_s: float = COMMAND_TIMEOUT_S) -> dict[str, object]:
    """What the prompt says brute force solves within the command timeout (its template variables)."""
    configs = promised_configurations(command_timeout_s)
    return {
        "brute_force_rate": f"{BRUTE_FORCE_CONFIGS_PER_SECOND / 1e6:g}",
        "brute_force_binary": math.floor(math.log2(configs)),
        "brute_force_ternary": math.floor(math.log(configs, 3)),
    }


def verifier_cpu_seconds(command_timeout_s: float = COMMAND_TIMEOUT_S, factor: float = 1.0) -> float:
    """CPU seconds each verifier call may use: the margin over the promised search, at the promised rate."""
    return VERIFIER_MARGIN * promised_configurations(command_timeout_s) / BRUTE_FORCE_CONFIGS_PER_SECOND * factor


def verifier_limits(command_timeout_s: float = COMMAND_TIMEOUT_S, factor: float = 1.0) -> PredLimits:
    """The limits of every pred and extractor call of a verification (`factor` > 1: a longer try)."""
    cpu = verifier_cpu_seconds(command_timeout_s, factor)
    return PredLimits(
        cpu_s=cpu, timeout_s=cpu * WALL_PER_CPU, memory_bytes=MEMORY_BYTES, file_size_bytes=FILE_SIZE_BYTES
    )


def longer(limits: PredLimits, factor: float = RETRY_FACTOR) -> PredLimits:
    """The same limits with `factor` times the time (a second try at an inconclusive verification)."""
    cpu = limits.cpu_s * factor if limits.cpu_s is not None else None
    return limits.model_copy(update={"cpu_s": cpu, "timeout_s": limits.timeout_s * factor})
