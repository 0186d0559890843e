"""Each certificate a session submitted, and its verdict, as files of their own in the run directory.

    certificates/<item>/01.json           the certificate, as the model submitted it (`predbench verify` reads it)
    certificates/<item>/01.verdict.json   the verifier's verdict on it, with pred's evidence

The item record holds the same certificates and verdicts, and lists these files by paths relative to
the run directory; a leaderboard links to them, so a reader can open (or re-verify) one certificate
without parsing a record, and a copied or zipped run still links up. They are written by the worker
in the locked step that writes the item's record (run/books.py), before it: a process that dies
between the two leaves files that the item's next attempt replaces, never a record naming files that
are not there. The audit (state/audit.py) checks that the files exist and say what the record says.
"""

import shutil

from pydantic import BaseModel

from pytest_predbench.files import CorruptStateError, read_model, write_text_atomic
from pytest_predbench.state.rundir import RunDir, certificate_name, verdict_name
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.verdict import Verdict


class CertificateFiles(BaseModel):
    """Where one certificate and its verdict are kept, relative to the run directory."""

    certificate: str
    verdict: str


def certificate_listing(key: str, count: int) -> list[CertificateFiles]:
    """Where the item's `count` certificates and verdicts are kept, relative to the run directory
    (names only: they do not depend on where the run is, nor on whether it keeps the files yet)."""
    return [
        CertificateFiles(certificate=certificate_name(key, n), verdict=verdict_name(key, n))
        for n in range(1, count + 1)
    ]


def clear_certificate_files(run: RunDir, key: str) -> None:
    """Remove what an earlier attempt of the item left (call under the run's state lock)."""
    shutil.rmtree(run.certificate_dir(key), ignore_errors=True)


def write_certificate_files(run: RunDir, key: str, certificates: list[Certificate], verdicts: list[Verdict]) -> None:
    """One certificate file and one verdict file per certificate, each written atomically, after
    whatever an earlier attempt of the item left is removed (call under the run's state lock)."""
    clear_certificate_files(run, key)
    for n, (certificate, verdict) in enumerate(zip(certificates, verdicts, strict=True), 1):
        write_text_atomic(run.certificate_file(key, n), certificate.file_text())
        write_text_atomic(run.verdict_file(key, n), verdict.model_dump_json(indent=2) + "\n")


def _read(run: RunDir, relative: str, model: type[Certificate] | type[Verdict]) -> Certificate | Verdict | str:
    """The file's content, or one line saying why it cannot be read."""
    path = run.inside(relative)
    if path is None:
        return f"{relative} is not a path inside the run directory"
    try:
        return read_model(path, model)
    except FileNotFoundError:
        return f"{relative} is missing"
    except CorruptStateError as exc:
        return str(exc)


def certificate_file_faults(
    run: RunDir,
    key: str,
    files: list[CertificateFiles],
    certificates: list[Certificate],
    verdicts: list[Verdict],
    kept: bool = True,
) -> list[str]:
    """Why the record's certificate files do not say what the record says (empty: they do). `kept`:
    the files lie in `run` (a run directory); a shared store keeps the certificates in the record
    alone and writes the files when it is exported, so only the names listed are checked."""
    if len(files) != len(certificates):
        return [f"{len(certificates)} certificate(s) but {len(files)} certificate file(s) listed"]
    found = []
    for n, (entry, expected, certificate, verdict) in enumerate(
        zip(files, certificate_listing(key, len(files)), certificates, verdicts, strict=False), 1
    ):
        if entry != expected:
            found.append(f"certificate {n} is listed as {entry.certificate}, not {expected.certificate}")
            continue
        if not kept:
            continue
        for relative, model, recorded in (
            (entry.certificate, Certificate, certificate),
            (entry.verdict, Verdict, verdict),
        ):
            content = _read(run, relative, model)
            if isinstance(content, str):
                found.append(content)
            elif content != recorded:
                found.append(f"{relative} differs from the {model.__name__.lower()} the record holds")
    return found
