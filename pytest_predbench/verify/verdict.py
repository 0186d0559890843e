"""What the verifier concludes about one certificate, with pred's own words as evidence.

pred's words name host paths (a panic names the source file it panicked in), and a Verdict is what
every record holds of a verification (the item record, the certificate's verdict file, a shared
store's rows, `predbench verify --json`, the report's pages and tables built from them). So a
Verdict holds none: every one made, or read back, is rewritten by verify/hostpaths.py's record
rules, and so is every one written out (one changed since, by model_copy or assignment, too), all
but the name its input was given (ORIGINS). The verifier's own checks read pred's output before
any Verdict exists, as it came.
"""

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer, model_validator

from pytest_predbench.verify import hostpaths
from pytest_predbench.verify.certificate import Violation
from pytest_predbench.verify.pred import PredCall


class Outcome(StrEnum):
    """The four ways a verification ends. Only ACCEPTED and REJECTED are verdicts on the certificate:
    the other two say the verifier did not reach one, and are never scored either way."""

    ACCEPTED = "accepted"
    """The violation is confirmed by the pinned library: a bug (or a crash) of the rule."""
    REJECTED = "rejected"
    """A check failed on the certificate's own account: a false alarm of whoever submitted it."""
    INCONCLUSIVE = "inconclusive"
    """A limit of the verifier's own (a call's CPU time, wall time or memory) cut the verification
    short: more time might decide it. Never a false alarm; verified again with longer limits
    before a report (verify/reach.py), listed there if it stays undecided."""
    ERROR = "error"
    """The verifier itself failed (an exception inside its checks): a fault of predbench, recorded
    as an infrastructure failure and run again, never counted against the model."""


ORIGINS = ("certificate", "same_as")
"""A Verdict's fields naming its input as whoever asked for it named it (the files given to
`predbench verify`, so that its lines name them as typed; a run's records name none): kept as given,
in these fields and wherever the verdict repeats them (`cannot read FILE`)."""


class Check(BaseModel):
    """One step of verification; `evidence` holds the pred calls it rests on."""

    name: str
    passed: bool
    detail: str
    evidence: list[PredCall] = []


class Verdict(BaseModel):
    accepted: bool
    """outcome is ACCEPTED (kept as a field: every record written before `outcome` has it)."""
    outcome: Outcome
    """How the verification ended; a record without it (written before it existed) reads as
    accepted or rejected from `accepted`."""
    violation: Violation | None = None
    """The violation confirmed (None unless accepted)."""
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
    pred_version: str | None = None
    """The pred version that judged it (None: a record written before the field, or input refused
    before any environment was chosen). Which version judges is explicit: `predbench verify` refuses
    a certificate whose own `pred_version` contradicts an explicit --pred-version (cli.py)."""
    pred_sha256: str | None = None
    """The sha256 of the pred binary that judged it."""
    extractor_sha256: str | None = None
    """The sha256 of the extractor (pred-extract) that judged it with pred."""

    def judged_by(self) -> str:
        """'pred 0.6.0 (sha256 0123456789ab)', or '' when no pred judged it."""
        if self.pred_version is None:
            return ""
        return f"pred {self.pred_version}" + (f" (sha256 {self.pred_sha256[:12]})" if self.pred_sha256 else "")

    @model_validator(mode="before")
    @classmethod
    def _outcome_from_accepted(cls, data: Any) -> Any:
        if isinstance(data, dict) and "outcome" not in data and "accepted" in data:
            data = {**data, "outcome": Outcome.ACCEPTED if data["accepted"] else Outcome.REJECTED}
        elif isinstance(data, dict) and "accepted" not in data and "outcome" in data:
            data = {**data, "accepted": Outcome(data["outcome"]) is Outcome.ACCEPTED}
        return data

    @model_validator(mode="after")
    def _accepted_is_the_outcome(self) -> "Verdict":
        if self.accepted != (self.outcome is Outcome.ACCEPTED):
            raise ValueError(f"accepted={self.accepted} contradicts outcome {self.outcome.value}")
        return self

    @model_validator(mode="after")
    def _no_host_paths(self) -> "Verdict":
        """The fields rewritten in place (its evidence copied, never changed: the verifier's own)."""
        rules = hostpaths.record_rules().keeping(self.certificate, self.same_as)
        for name, value in self:
            new = value if name in ORIGINS else hostpaths.redacted(value, rules)
            if new is not value:
                setattr(self, name, new)
        return self

    @model_serializer(mode="wrap")
    def _written_without_host_paths(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        rules = hostpaths.record_rules().keeping(data.get("certificate"), data.get("same_as"))
        return {name: value if name in ORIGINS else hostpaths.redacted(value, rules) for name, value in data.items()}

    @property
    def rejected(self) -> bool:
        """A false alarm: the only outcome that counts against whoever submitted the certificate."""
        return self.outcome is Outcome.REJECTED

    @property
    def inconclusive(self) -> bool:
        return self.outcome is Outcome.INCONCLUSIVE

    @property
    def error(self) -> bool:
        return self.outcome is Outcome.ERROR
