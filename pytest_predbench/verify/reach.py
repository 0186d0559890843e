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
set WALL_PER_CPU times higher. Memory: each call may use VERIFIER_MARGIN times the session's own
memory (SESSION_MEMORY_MIB, or the plan's). All the calls of one verification share a CPU budget of
CALLS_PER_BUDGET full-length calls, so no certificate costs more than certificate_cost_bound. What a
call still cannot finish, or the budget cuts short, is `inconclusive` (verify/verdict.py), and a
report verifies it again with RETRY_FACTOR times the limits and the budget.
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
SESSION_MEMORY_MIB = 4096
"""The default memory of a whole session, all its processes together (SessionLimits.memory_mib,
enforced by the kernel: session/bounds.py)."""
FILE_SIZE_BYTES = 64 * 1024**2
CALLS_PER_BUDGET = 3.0
"""A certificate's budget, in calls at their full CPU limit: a verification's few long calls are
the target's brute force, its ILP, and the source's feasibility; every other call is short."""


def verifier_memory_bytes(session_memory_mib: int = SESSION_MEMORY_MIB) -> int:
    """Each verifier call's memory limit: VERIFIER_MARGIN times the session's. The session's bound is
    on resident memory (a cgroup), the call's on address space (RLIMIT_AS), which is never less, so
    the margin keeps whatever the agent computed in its sandbox within the verifier's reach."""
    return int(VERIFIER_MARGIN * session_memory_mib * 1024**2)


def certificate_cpu_budget(command_timeout_s: float = COMMAND_TIMEOUT_S, factor: float = 1.0) -> float:
    """CPU seconds all the pred and extractor calls of one verification may use together; past it
    the claim is undecided (the report's retry has its own, `factor` times larger)."""
    return CALLS_PER_BUDGET * verifier_cpu_seconds(command_timeout_s, factor)


BUDGET_GRAIN_S = 1.0
"""RLIMIT_CPU counts whole seconds (and at least one): the last call of a verification may use up
to this much more than its budget had left."""


def verification_cpu_bound(command_timeout_s: float = COMMAND_TIMEOUT_S, factor: float = 1.0) -> float:
    """The most CPU seconds one verification can use: its budget, and the last call's grain."""
    return certificate_cpu_budget(command_timeout_s, factor) + BUDGET_GRAIN_S


def certificate_cost_bound(command_timeout_s: float = COMMAND_TIMEOUT_S) -> dict[str, float]:
    """The most CPU time one certificate can cost the verifier: in the run, then in the report (its
    first try, and the retry at RETRY_FACTOR times the limits), and the wall-clock backstop of all
    of it (WALL_PER_CPU times, reached only by calls that wait instead of computing)."""
    run = verification_cpu_bound(command_timeout_s)
    report = run + verification_cpu_bound(command_timeout_s, RETRY_FACTOR)
    return {
        "run_cpu_s": run,
        "report_cpu_s": report,
        "total_cpu_s": run + report,
        "total_wall_s": (run + report) * WALL_PER_CPU,
    }


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


def verifier_limits(
    command_timeout_s: float = COMMAND_TIMEOUT_S, factor: float = 1.0, session_memory_mib: int = SESSION_MEMORY_MIB
) -> PredLimits:
    """The limits of every pred and extractor call of a verification (`factor` > 1: a longer try),
    and the CPU budget of all of them together."""
    cpu = verifier_cpu_seconds(command_timeout_s, factor)
    return PredLimits(
        cpu_s=cpu,
        timeout_s=cpu * WALL_PER_CPU,
        memory_bytes=verifier_memory_bytes(session_memory_mib),
        file_size_bytes=FILE_SIZE_BYTES,
        budget_cpu_s=CALLS_PER_BUDGET * cpu,
        budget_wall_s=CALLS_PER_BUDGET * cpu * WALL_PER_CPU,
    )


def longer(limits: PredLimits, factor: float = RETRY_FACTOR) -> PredLimits:
    """The same limits with `factor` times the time, and the budget (a second try at an inconclusive
    verification)."""
    cpu = limits.cpu_s * factor if limits.cpu_s is not None else None
    budget = limits.budget_cpu_s * factor if limits.budget_cpu_s is not None else None
    wall = limits.budget_wall_s * factor if limits.budget_wall_s is not None else None
    update = {"cpu_s": cpu, "timeout_s": limits.timeout_s * factor, "budget_cpu_s": budget, "budget_wall_s": wall}
    return limits.model_copy(update=update)
