"""Many certificates at once: identical ones verified once, the rest in parallel.

A run, or a merged set of runs, holds hundreds of certificates and many copies of the same one
(one genuine bug found by many sessions). Verification spends its time waiting for pred, so
threads are enough to keep every core busy with pred processes; the certificates themselves are
independent. Every occurrence gets a verdict (a copy gets its original's, naming its own origin).
"""

import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from pytest_predbench.verify import pin
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.environment import EnvRecord
from pytest_predbench.verify.verdict import Verdict


class Found(NamedTuple):
    """One certificate where it was found (a file, or an item record's n-th certificate), or why
    what was found there is not a certificate."""

    origin: str
    certificate: Certificate | None
    problem: str | None = None


def certificate_key(certificate: Certificate) -> str:
    """Identical certificates have the same key: their JSON, keys sorted."""
    return json.dumps(certificate.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def verify_found(
    found: list[Found],
    record: EnvRecord | None,
    jobs: int | None = None,
    records: Callable[[str], EnvRecord] | None = None,
) -> list[Verdict]:
    """A verdict for every entry of `found`, in order; identical certificates are verified once,
    distinct ones `jobs` at a time (default: one per core). A certificate naming its pred version is
    verified on that version's record from `records` (without it, on `record`, which rejects another
    version). Raises what the verifier raises about the environment (PredEnvironmentError,
    LimitError): that is no verdict on any certificate. `record` may be None only when nothing in
    `found` is a certificate (each is rejected as malformed without pred)."""
    from pytest_predbench.verify.verifier import rejected, verify

    def record_of(certificate: Certificate) -> EnvRecord:
        assert record is not None, "a readable certificate is verified on a record"
        wanted = certificate.pred_version
        if records is None or wanted in (None, record.pred_version) or wanted not in pin.supported():
            return record  # the verifier rejects a version other than the record's
        return records(wanted)

    first: dict[str, int] = {}
    for n, entry in enumerate(found):
        if entry.certificate is not None:
            first.setdefault(certificate_key(entry.certificate), n)
    with ThreadPoolExecutor(max_workers=max(1, jobs or default_jobs())) as pool:
        futures = {
            n: pool.submit(verify, found[n].certificate, record_of(found[n].certificate), source=found[n].origin)
            for n in first.values()
        }
        judged = {n: future.result() for n, future in futures.items()}
    verdicts = []
    for n, entry in enumerate(found):
        if entry.certificate is None:
            verdicts.append(rejected(f"malformed certificate: {entry.problem}", source=entry.origin, record=record))
            continue
        original = first[certificate_key(entry.certificate)]
        verdict = judged[original]
        if original != n:
            verdict = verdict.model_copy(update={"certificate": entry.origin, "same_as": found[original].origin})
        verdicts.append(verdict)
    return verdicts
