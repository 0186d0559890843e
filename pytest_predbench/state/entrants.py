"""What a run ranks: entrants, each an (agent, model) pair, and the one rule that names them.

A run crosses agent programs with models (`--agents mini-swe,opencode --models a,b`): every model
runs under every agent, except a baseline, which is its own agent and runs once. One entrant's
sessions are one leaderboard row, one ledger account (its cap is the per-entrant cap) and one
results file; its label keys all of them, and the item ids (`<label>-s<NN>`).

The label is the model id alone for the default agent, so every run made before there were agents
keeps its item ids, accounts and rows (and a resume of it its plan): likewise for the entrants of
the FAKE runner and of a baseline, which run no agent program. Any other agent's entrant is
`<agent>:<model>` (`opencode:demo/finder`), so an entrant's label says the same thing in every run
and `--compare` never merges two agents' rows.
"""

from typing import NamedTuple

from pytest_predbench.session import baseline

DEFAULT_AGENT = "mini-swe"
FAKE = "fake"
AGENTS = (DEFAULT_AGENT, "opencode", FAKE)
"""What `--agents` (and its one-agent spelling `--runner`) may name."""
SEPARATOR = ":"
BARE = (DEFAULT_AGENT, FAKE, baseline.RUNNER)
"""The agents whose entrants are labelled by their model alone."""


class Entrant(NamedTuple):
    agent: str
    """The runner of its sessions: an agent of AGENTS, or the baseline's own runner."""
    model: str

    @property
    def label(self) -> str:
        return self.model if self.agent in BARE else f"{self.agent}{SEPARATOR}{self.model}"


def entrants(agents: list[str], models: list[str]) -> list[Entrant]:
    """Every entrant of a plan, by model, then by agent in the order given (a baseline once)."""
    return [
        entrant
        for model in models
        for entrant in (
            [Entrant(baseline.RUNNER, model)] if baseline.is_baseline(model) else [Entrant(a, model) for a in agents]
        )
    ]


def installed_version(agent: str) -> str | None:
    """The version of an agent that is no Python package of the plan's (those are in `packages`):
    opencode's pin; None for the others."""
    if agent == "opencode":
        from pytest_predbench.session import opencode_install

        return opencode_install.VERSION
    return None


def package_version(agent: str, packages: dict[str, str | None]) -> str | None:
    """The version of an agent that is a Python package, from the plan's `packages`."""
    return packages.get("mini-swe-agent") if agent == DEFAULT_AGENT else None
