"""The one submission channel: `submit-certificate FILE` in the agent's shell.

Certificates hidden in prose or left lying in the scratch directory once corrupted results;
here nothing counts unless it went through this command. The command only copies the file
into a spool directory; after each shell command the harness takes what was spooled, checks
its shape with the Certificate model, and answers with shape errors only — never a verdict,
which the verifier gives after the session, out of the model's sight.
"""

import os
import stat
import uuid
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import read_untrusted
from pytest_predbench.session.limits import SPOOL_BYTES, SPOOL_ENTRIES
from pytest_predbench.session.protocol import SessionLimits
from pytest_predbench.session.sandbox import Sandbox
from pytest_predbench.verify.certificate import (
    MAX_CERTIFICATE_BYTES,
    Certificate,
    CertificateError,
    parse_certificate,
)
from pytest_predbench.verify.graph import ListingError, RuleTable, rule_table, spec

SPOOL_DIR = "/predbench/spool"
"""Where the spool appears inside the sandbox."""
MAX_SUBMISSIONS = 20
"""Per session, so a looping agent cannot flood the verifier."""

SUBMIT_SCRIPT = f"""#!/bin/sh
# submit-certificate FILE: hand a counterexample certificate to the harness.
if [ "$#" -ne 1 ]; then echo "usage: submit-certificate FILE" >&2; exit 2; fi
if [ ! -f "$1" ]; then echo "submit-certificate: $1 is not a file" >&2; exit 2; fi
name=$(date +%s%N)-$$
cp -- "$1" "{SPOOL_DIR}/.$name.part" && mv "{SPOOL_DIR}/.$name.part" "{SPOOL_DIR}/$name.json" || exit 1
echo "submit-certificate: $1 handed to the harness (its shape check follows)"
"""


class Receipt(BaseModel):
    """What the harness made of one spooled file."""

    certificate: Certificate | None = None
    error: str | None = None
    number: int = 0
    """1-based among this session's accepted submissions."""
    hint: str | None = None
    """Set when the certificate names no rule pred lists (verify/graph.py): it is still verified."""

    def message(self) -> str:
        if self.certificate is not None:
            received = (
                f"[harness] certificate #{self.number} received; it is well-formed and will be verified "
                "after the session (the verdict is not shown during the session)."
            )
            if self.hint:
                received += (
                    f" But its source and target name no rule: {self.hint}. A certificate names one rule, "
                    "so the verifier rejects one that names none; submit a corrected one."
                )
            return received
        return f"[harness] submission refused: {self.error}"


class Spool:
    """The host side of the channel for one session.

    Everything in the spool is the agent's: a collect reads at most SPOOL_ENTRIES entries and
    SPOOL_BYTES bytes, each inode once while it has a link (150 hard links to one file are one read),
    and never walks into a directory (a directory is set aside by one rename, whatever its depth)."""

    def __init__(self, host_dir: Path, rules: RuleTable | None = None):
        self.dir = Path(host_dir)
        self.rules = rules
        """The session's pred's rules, for the hint on a certificate that names none (None: no hint)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.accepted: list[Certificate] = []
        self.refused = 0
        self.seen: dict[tuple[int, int], int] = {}
        """(device, inode) of every file read that still has a link -> its receipt's number (0: it was
        refused)."""

    def collect(self) -> list[Receipt]:
        """Take newly spooled files, oldest first, within the bounds; each is removed once taken."""
        found: list[tuple[int, str, os.stat_result]] = []
        more = False
        with os.scandir(self.dir) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if len(found) == SPOOL_ENTRIES:
                    more = True
                    break
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                found.append((info.st_mtime_ns, entry.name, info))
        receipts, budget = [], SPOOL_BYTES
        for _, name, info in sorted(found, key=lambda f: (f[0], f[1])):
            path = self.dir / name
            receipt, budget = self._take(path, info, budget)
            receipts.append(receipt)
            if _discard(path, info):
                self.seen.pop((info.st_dev, info.st_ino), None)
        if more:
            self.refused += 1
            receipts.append(
                Receipt(error=f"more than {SPOOL_ENTRIES} files in the spool; the rest wait for the next command")
            )
        return receipts

    def _take(self, path: Path, info: os.stat_result, budget: int) -> tuple[Receipt, int]:
        """The receipt of one entry and the bytes left to read after it."""
        key = (info.st_dev, info.st_ino)
        if stat.S_ISREG(info.st_mode) and key in self.seen:
            self.refused += 1
            return Receipt(error="the same file as an earlier submission (a hard link); submitted once"), budget
        if len(self.accepted) >= MAX_SUBMISSIONS:
            self.refused += 1
            return Receipt(
                error=f"this session already has {MAX_SUBMISSIONS} certificates, the most it may submit"
            ), budget
        if stat.S_ISREG(info.st_mode) and min(info.st_size, MAX_CERTIFICATE_BYTES + 1) > budget:
            self.refused += 1
            return Receipt(error=f"more than {SPOOL_BYTES} bytes submitted by one command; not read"), budget
        try:
            data = read_untrusted(path, MAX_CERTIFICATE_BYTES + 1)
            self.seen[key] = 0
            budget -= len(data)
            certificate = parse_certificate(data)
        except OSError as exc:
            self.refused += 1
            return Receipt(error=f"cannot read the submitted file: {exc.strerror or exc}"), budget
        except CertificateError as exc:
            self.refused += 1
            return Receipt(error=f"not a well-formed certificate: {exc}"), budget
        self.accepted.append(certificate)
        self.seen[key] = len(self.accepted)
        return Receipt(certificate=certificate, number=len(self.accepted), hint=self._hint(certificate)), budget

    def _hint(self, certificate: Certificate) -> str | None:
        if self.rules is None:
            return None
        source, target = certificate.source, certificate.target
        return self.rules.names_no_rule(spec(source.type, source.variant), spec(target.type, target.variant))


def _discard(path: Path, info: os.stat_result) -> bool:
    """Remove a taken entry in one step: a directory is renamed out of sight (removing it would
    walk a tree of any depth), anything else unlinked. The session's disk goes with the session.
    True when that was a file's last link: its inode number is then free for the filesystem to give
    a new file (ext4 does at once), which must not pass for a link to this one."""
    try:
        if stat.S_ISDIR(info.st_mode):
            path.rename(path.with_name(f".taken-{uuid.uuid4().hex}"))
            return False
        try:
            held = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            path.unlink(missing_ok=True)
            return False
        try:
            path.unlink(missing_ok=True)
            return os.fstat(held).st_nlink == 0
        finally:
            os.close(held)
    except OSError:
        return False


def channel_sandbox(
    *,
    pred_path: Path,
    source_dir: Path,
    state_dir: Path,
    extractor_path: Path | None = None,
    tools: dict[str, str] | None = None,
    writable: tuple[str, ...] = (),
    limits: SessionLimits | None = None,
    bwrap: str = "bwrap",
    snapshots: Path | str | None = None,
) -> tuple[Sandbox, Spool]:
    """A session's sandbox with its one submission channel: the `submit-certificate` tool (beside
    any other `tools`) and the spool it writes to, on the session's bounded disk beside its scratch.
    Host-side state goes under `state_dir`, outside the sandbox's view. Every session builds its
    sandbox here, whatever runs in it, and so does the preflight's sandbox gate: the same tools,
    paths, channel and bounds for every model and the baseline. The caller closes the sandbox.
    `snapshots`: where the gateway stores the instances of `pred reduce` calls (SessionEnv.instances_dir)."""
    sandbox = Sandbox(
        pred_path=Path(pred_path),
        extractor_path=Path(extractor_path) if extractor_path else None,
        source_dir=Path(source_dir),
        state_dir=Path(state_dir) / "sandbox",
        tools={"submit-certificate": SUBMIT_SCRIPT, **(tools or {})},
        writable=(SPOOL_DIR, *writable),
        limits=limits,
        bwrap=bwrap,
        snapshots=Path(snapshots) if snapshots else None,
    )
    return sandbox, Spool(sandbox.writable_dir(SPOOL_DIR), _rules(Path(pred_path)))


def _rules(pred: Path) -> RuleTable | None:
    """The session's pred's rules; None (no hints, nothing else lost) when it does not list them."""
    try:
        return rule_table(pred)
    except ListingError:
        return None
