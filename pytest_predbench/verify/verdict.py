"""What the verifier concludes about one certificate, with pred's own words as evidence."""

from pydantic import BaseModel

from pytest_predbench.verify.certificate import Violation
from pytest_predbench.verify.pred import PredCall


class Check(BaseModel):
    """One step of verification; `evidence` holds the pred calls it rests on."""

    name: str
    passed: bool
    detail: str
    evidence: list[PredCall] = []


class Verdict(BaseModel):
    accepted: bool
    violation: Violation | None = None
    """The violation confirmed (None when rejected)."""
    reason: str
    """One line: why it was accepted, or the first check that failed."""
    rule: str | None = None
    """The rule as pred derived it: 'Source -> Target', hops joined when multi-hop."""
    reduction_path: list[str] = []
    checks: list[Check] = []
    pred_calls: int = 0
    seconds: float = 0.0
    certificate: str | None = None
    """Where the certificate came from (a path), when it came from a file."""
    same_as: str | None = None
    """In a batch: identical to the certificate from this origin, whose verification this is."""
