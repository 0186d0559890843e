"""The counterexample certificate: the one thing a model submits, and all the verifier reads.

It is plain JSON that pred can replay. Unknown fields are rejected rather than ignored, so a
typo in a field name can never silently drop part of a claim.
"""

import json
import math
import os
import sys
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from pytest_predbench.files import read_untrusted

FIXTURES_DIR = Path(str(files("pytest_predbench.fixtures")))
"""The top-level fixtures/ of the checkout, shipped in the wheel as the package pytest_predbench.fixtures
(pyproject's package-dir): the schema and the calibration set, one copy for both."""
SCHEMA_PATH = FIXTURES_DIR / "certificate.schema.json"

# Size limits, checked before pred ever runs: a certificate is a small counterexample, not a
# stress test of the verifier. Larger input is rejected with this reason.
MAX_CERTIFICATE_BYTES = 256 * 1024
MAX_SOLUTION_LENGTH = 4096
MAX_NESTING_DEPTH = 64
"""Arrays and objects inside one another, the certificate itself counting as 1. pred's own JSON
reader gives up at 128; a real instance needs fewer than 10. Deeper input would exhaust the
recursion of JSON encoders (pydantic's stops at 254), so it is refused before anything walks it."""

Config = list[Annotated[StrictInt, Field(ge=0)]]


class Violation(StrEnum):
    UNSOUND_EXTRACTION = "unsound_extraction"
    INCOMPLETE_REDUCTION = "incomplete_reduction"
    SUBOPTIMAL_EXTRACTION = "suboptimal_extraction"
    CRASH = "crash"
    """The library panics reducing a valid source instance, or mapping a valid target solution back."""


class Solver(StrEnum):
    BRUTE_FORCE = "brute-force"
    ILP = "ilp"


class ProblemInstance(BaseModel):
    """A problem exactly as pred reads it from a file: `{"type", "variant", "data"}`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: StrictStr = Field(min_length=1, max_length=200)
    variant: dict[StrictStr, StrictStr]
    data: Any

    def to_pred_json(self) -> str:
        return json.dumps({"type": self.type, "variant": self.variant, "data": self.data})


class Certificate(BaseModel):
    """One claimed bug of one rule: `target` is what the rule makes of `source` in one step.
    Which solution fields are required depends on the violation."""

    model_config = ConfigDict(extra="forbid")

    violation: Violation
    rule: StrictStr | None = Field(default=None, description="'Source -> Target', informational only")
    source: ProblemInstance
    target: ProblemInstance
    """For a crash while reducing, the target's type and variant, with `data` null."""
    target_solution: Config | None = Field(default=None, max_length=MAX_SOLUTION_LENGTH)
    source_solution: Config | None = Field(default=None, max_length=MAX_SOLUTION_LENGTH)
    better_source_solution: Config | None = Field(default=None, max_length=MAX_SOLUTION_LENGTH)
    solver: Solver = Solver.BRUTE_FORCE
    note: StrictStr | None = Field(default=None, max_length=4000)
    pred_version: StrictStr | None = Field(
        default=None,
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="the pred version the bug is claimed on; `predbench verify` verifies it on that version",
    )

    def file_text(self) -> str:
        """The certificate as a file, without its unset (None) fields — but every instance keeps its
        `data`, which is required even when null (the target of a crash while reducing has none):
        the file reads back as this very certificate."""
        fields = self.model_dump(mode="json", exclude_none=True)
        for name in ("source", "target"):
            fields[name]["data"] = getattr(self, name).data
        return json.dumps(fields, indent=2) + "\n"

    @model_validator(mode="after")
    def _fields_match_violation(self) -> "Certificate":
        v = self.violation
        if v is Violation.CRASH:
            if self.source_solution is not None or self.better_source_solution is not None:
                raise ValueError(
                    "crash takes no source_solution or better_source_solution (only target_solution, "
                    "when the crash is in mapping it back)"
                )
            return self
        if self.source_solution is None:
            raise ValueError(f"{v.value} needs source_solution")
        if v is Violation.INCOMPLETE_REDUCTION:
            if self.target_solution is not None:
                raise ValueError("incomplete_reduction takes no target_solution (the claim is that none exists)")
        elif self.target_solution is None:
            raise ValueError(f"{v.value} needs target_solution")
        if v is Violation.SUBOPTIMAL_EXTRACTION:
            if self.better_source_solution is None:
                raise ValueError("suboptimal_extraction needs better_source_solution")
        elif self.better_source_solution is not None:
            raise ValueError(f"better_source_solution is only for suboptimal_extraction, not {v.value}")
        return self


class CertificateError(ValueError):
    """The input is not a well-formed certificate; the message is one line saying why."""


def describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's errors, folded into one line a model or a person can act on."""
    parts = []
    for err in exc.errors()[:5]:
        where = "".join(step(p) for p in err["loc"]).lstrip(".") or "<root>"
        parts.append(f"{where}: {' '.join(err['msg'].split())}")
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def step(key: str | int) -> str:
    """One step of a path into a JSON value, printable on one line: `.name`, `[3]` or `["odd key"]`."""
    if isinstance(key, int):
        return f"[{key}]"
    if key.isidentifier() and key.isascii():
        return f".{key}"[:40]
    return f"[{json.dumps(key)[:38]}]"


def _where(path: list[str]) -> str:
    where = "".join(path).lstrip(".") or "<root>"
    return where if len(where) <= 80 else where[:77] + "..."


def json_value_problem(value: Any, where: str = "", depth: int = 1) -> str | None:
    """Why a parsed JSON value cannot be part of a certificate, or None: nested deeper than
    MAX_NESTING_DEPTH, a non-finite number (NaN, Infinity: not JSON, and never equal to anything),
    or a string with a lone surrogate (``"\\ud800"`` parses in Python but is not Unicode, so no
    encoder can write it back). Iterative, so it never recurses on hostile input."""
    stack: list[tuple[Any, list[str], int]] = [(value, [f".{where}"] if where else [], depth)]
    while stack:
        item, path, level = stack.pop()
        if isinstance(item, dict | list):
            if level > MAX_NESTING_DEPTH:
                return f"{_where(path)}: nested too deeply (over {MAX_NESTING_DEPTH} levels)"
            if isinstance(item, dict):
                for key, inner in item.items():
                    if not _is_unicode(key):
                        return f"{_where(path)}: a key is not valid Unicode (a lone surrogate)"
                    stack.append((inner, [*path, step(key)], level + 1))
            else:
                stack.extend((inner, [*path, step(i)], level + 1) for i, inner in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{_where(path)}: {item} is not a JSON number"
        elif isinstance(item, str) and not _is_unicode(item):
            return f"{_where(path)}: a string is not valid Unicode (a lone surrogate)"
    return None


def _is_unicode(text: Any) -> bool:
    try:
        str(text).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def certificate_problem(cert: Certificate) -> str | None:
    """json_value_problem for a Certificate built in Python rather than parsed: its free-form parts
    are the instances' data (every other field has a strict type)."""
    for name, instance in (("source", cert.source), ("target", cert.target)):
        problem = json_value_problem(instance.data, f"{name}.data", depth=3)
        if problem:
            return problem
    return None


def _constant(name: str) -> Any:
    raise CertificateError(f"not JSON: {name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise CertificateError(f"not JSON: the number {text[:40]} is beyond a 64-bit float")
    return value


def _int(text: str) -> int:
    """Python refuses to convert over sys.get_int_max_str_digits() digits (a plain ValueError)."""
    digits, most = len(text.lstrip("-")), sys.get_int_max_str_digits()
    if most and digits > most:
        raise CertificateError(f"not JSON: a number has {digits} digits, more than {most}")
    return int(text)


def parse_certificate(text: str | bytes) -> Certificate:
    """Parse and validate, with the documented size and nesting limits checked first."""
    size = len(text.encode(errors="surrogatepass") if isinstance(text, str) else text)
    if size > MAX_CERTIFICATE_BYTES:
        raise CertificateError(f"certificate is {size} bytes, over the {MAX_CERTIFICATE_BYTES}-byte limit")
    try:
        raw = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CertificateError(f"not JSON: {exc}") from exc
    except RecursionError as exc:
        raise CertificateError(f"not JSON: nested too deeply (over {MAX_NESTING_DEPTH} levels)") from exc
    if not isinstance(raw, dict):
        raise CertificateError(f"a certificate is a JSON object, got {type(raw).__name__}")
    problem = json_value_problem(raw)
    if problem:
        raise CertificateError(problem)
    try:
        return Certificate.model_validate(raw)
    except ValidationError as exc:
        raise CertificateError(describe_validation_error(exc)) from exc
    except RecursionError as exc:
        raise CertificateError(f"certificate is nested too deeply (over {MAX_NESTING_DEPTH} levels)") from exc


def load_certificate(path: Path) -> Certificate:
    """A certificate file: a regular file, refused unread past the size limit (a FIFO or a
    device would block or never end)."""
    try:
        if os.stat(path).st_size > MAX_CERTIFICATE_BYTES:
            raise CertificateError(f"{path} is over the {MAX_CERTIFICATE_BYTES}-byte limit; not read")
        data = read_untrusted(Path(path), MAX_CERTIFICATE_BYTES + 1)
    except OSError as exc:
        raise CertificateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_certificate(data)


def certificate_schema() -> dict:
    return Certificate.model_json_schema()


def schema_text() -> str:
    return json.dumps(certificate_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # regenerate the checked-in schema
    SCHEMA_PATH.write_text(schema_text())
    print(f"wrote {SCHEMA_PATH}")
