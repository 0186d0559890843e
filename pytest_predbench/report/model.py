"""The leaderboard as typed records: what leaderboard.json holds, and every renderer reads."""

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.state.plan import Budget, ModelIdentity


class PredManifest(BaseModel):
    version: str
    sha256: str
    source_sha256: str
    extractor_sha256: str


class RunManifest(BaseModel):
    """What one run stood on, so anyone can check that the comparison was fair."""

    path: str
    plan_digest: str
    runner: str
    models: list[str]
    sessions: int
    budget: Budget
    limits: SessionLimits
    pred: PredManifest | None
    prompt_hash: str
    packages: dict[str, str | None]
    model_identities: dict[str, ModelIdentity] = {}
    model_settings_sha256: str | None = None


class ModelRow(BaseModel):
    rank: int
    model: str
    verified_bugs: int
    """Distinct rules with a re-verified certificate: the primary metric."""
    rules: list[str]
    accepted_certificates: int
    false_alarms: int
    certificates: int
    false_alarm_rate: float | None
    sessions_planned: int
    sessions_run: int
    sessions_skipped: int
    dollars: float
    """Spend of the sessions that ended in a result."""
    dollars_no_result: float
    """Spend that bought no result (infrastructure failures, lost sessions), from the ledger."""
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    model_calls: int
    pred_calls: int
    bugs_per_dollar: float | None
    bugs_per_million_tokens: float | None


class Finding(BaseModel):
    """Identical certificates: one rule, one canonical source instance."""

    rule: str
    source_type: str
    source_sha256: str
    violations: list[str]
    certificates: int
    models: list[str]
    sessions: list[str]
    known_bugs: list[str] = []
    """The ids of the known-bug registry's entries for this rule (empty: not a known bug)."""


class RuleRow(BaseModel):
    rule: str
    models: list[str]
    """Which models found it (at least one re-verified certificate)."""
    findings: int
    """Distinct source instances that show it."""


class Reverification(BaseModel):
    pred_version: str | None
    pred_sha256: str | None
    certificates: int
    """Accepted certificates in the records, all re-verified."""
    distinct: int
    """Distinct certificates among them (each verified once)."""


class Leaderboard(BaseModel):
    schema_version: Literal[1] = 1
    generated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    runner: str
    fake: bool
    """A fake-runner run measures no model; every output says so."""
    models: list[ModelRow]
    rules: list[RuleRow]
    findings: list[Finding]
    reverification: Reverification
    runs: list[RunManifest]
