"""The counterexample certificate: the one thing a model submits, and all the verifier reads.

It is plain JSON that pred can replay. Unknown fields are rejected rather than ignored, so a
typo in a field name can never silently drop part of a claim.
"""

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "fixtures" / "certificate.schema.json"

# Size limits, checked before pred ever runs: a certificate is a small counterexample, not a
# stress test of the verifier. Larger input is rejected with this reason.
MAX_CERTIFICATE_BYTES = 256 * 1024
MAX_SOLUTION_LENGTH = 4096

Config = list[Annotated[StrictInt, Field(ge=0)]]


class Violation(StrEnum):
    UNSOUND_EXTRACTION = "unsound_extraction"
    INCOMPLETE_REDUCTION = "incomplete_reduction"
    SUBOPTIMAL_EXTRACTION = "suboptimal_extraction"


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
    """One claimed bug. Which solution fields are required depends on the violation."""

    model_config = ConfigDict(extra="forbid")

    violation: Violation
    rule: StrictStr | None = Field(default=None, description="'Source -> Target', informational only")
    source: ProblemInstance
    target: ProblemInstance
    target_solution: Config | None = Field(default=None, max_length=MAX_SOLUTION_LENGTH)
    source_solution: Config = Field(max_length=MAX_SOLUTION_LENGTH)
    better_source_solution: Config | None = Field(default=None, max_length=MAX_SOLUTION_LENGTH)
    solver: Solver = Solver.BRUTE_FORCE
    note: StrictStr | None = Field(default=None, max_length=4000)

    @model_validator(mode="after")
    def _fields_match_violation(self) -> "Certificate":
        v = self.violation
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
        where = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{where}: {err['msg']}")
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def parse_certificate(text: str | bytes) -> Certificate:
    """Parse and validate, with the documented size limit checked first."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_CERTIFICATE_BYTES:
        raise CertificateError(f"certificate is {size} bytes, over the {MAX_CERTIFICATE_BYTES}-byte limit")
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CertificateError(f"not JSON: {exc}") from exc
    except RecursionError as exc:
        raise CertificateError("not JSON: nested too deeply") from exc
    if not isinstance(raw, dict):
        raise CertificateError(f"a certificate is a JSON object, got {type(raw).__name__}")
    try:
        return Certificate.model_validate(raw)
    except ValidationError as exc:
        raise CertificateError(describe_validation_error(exc)) from exc
    except RecursionError as exc:
        raise CertificateError("certificate is nested too deeply") from exc


def load_certificate(path: Path) -> Certificate:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CertificateError(f"cannot read {path}: {exc.strerror}") from exc
    return parse_certificate(data)


def certificate_schema() -> dict:
    return Certificate.model_json_schema()


def schema_text() -> str:
    return json.dumps(certificate_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # regenerate the checked-in schema
    SCHEMA_PATH.write_text(schema_text())
    print(f"wrote {SCHEMA_PATH}")
