"""How an option is spelled on the command line, declared once, beside the value it sets.

A plan option is a field of PlanOptions whose annotation carries a Flag: its type and default are the
field's, its spelling and help the Flag's, and for a session limit the SessionLimits field it sets
(whose default the help then quotes). options.py builds the pytest options from these fields,
run/planning.py the session limits, Plan.content what the digest leaves out. An option that steers
one invocation only (`--run-dir`, `--resume-bench`, ...) is a Flag with its own `dest`, type and
default, in options.py. So a default is written in one place and every help text quotes it.
"""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One command-line option. `help` may hold `{default}`: the default, as the code has it."""

    names: tuple[str, ...]
    """The flag first, then any other spelling (`--agents`, `--runner`)."""
    help: str
    metavar: str | None = None
    const: Any = None
    """A flag that takes no value: it sets the field to this (`--unbounded`: True)."""
    on_off: bool = False
    """A boolean given as `on` or `off` (`--prompt-cache`)."""
    repeat: bool = False
    """A list given one value a time (`--fake-certificate F --fake-certificate G`); other lists are comma lists."""
    digest: bool = True
    """False: the plan records the value but its digest does not cover it (a name, a host path)."""
    limit: str | None = None
    """The SessionLimits field a session limit sets."""
    least: int | float | None = None
    """The least a limit may be: an int, a whole number; a float, cores (or 0, no bound); None, a
    positive number of seconds."""
    # An option of one invocation only (no plan field behind it):
    dest: str | None = None
    parse: type | None = None
    """Its argparse type."""
    default: Any = None

    @property
    def name(self) -> str:
        return self.names[0]


def flag_of(field_info) -> Flag | None:
    """The Flag a pydantic field's annotation carries, if any."""
    return next((m for m in field_info.metadata if isinstance(m, Flag)), None)
