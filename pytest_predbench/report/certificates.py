"""Every certificate in what a user names: certificate files, directories of them, item records, and
whole run directories (every certificate each session submitted).

`predbench verify` takes any of these, so that a run can be re-checked after the fact with one
command. Each certificate keeps where it came from (`items/a__x-s01.json#2`: the record's second
certificate), and what cannot be read as one is kept too, with why, to be reported as rejected.
"""

import json
from pathlib import Path

from pydantic import ValidationError

from pytest_predbench.files import CorruptStateError, read_untrusted
from pytest_predbench.state.records import ItemRecord, read_items
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify.batch import Found
from pytest_predbench.verify.certificate import CertificateError, describe_validation_error, parse_certificate

MAX_RECORD_BYTES = 64 * 1024**2
"""An item record holds its certificates and their verdicts' evidence: far larger than one certificate."""


def find_certificates(paths: list[Path]) -> list[Found]:
    """The certificates in `paths`, in the order given (a directory's files sorted by name)."""
    found: list[Found] = []
    for path in paths:
        if path.is_dir() and RunDir(path).plan.is_file():
            found += _in_run(RunDir(path))
        elif path.is_dir():
            for file in sorted(path.glob("*.json")):
                found += _in_file(file)
        else:
            found += _in_file(path)
    return found


def _in_run(run: RunDir) -> list[Found]:
    try:
        records = read_items(run)
    except CorruptStateError as exc:
        return [Found(origin=str(run.items), certificate=None, problem=str(exc))]
    return [entry for path, record in records for entry in _of_record(path, record)]


def _of_record(path: Path, record: ItemRecord) -> list[Found]:
    certificates = record.result.certificates if record.result else []
    return [Found(origin=f"{path}#{n}", certificate=c) for n, c in enumerate(certificates, 1)]


def _in_file(path: Path) -> list[Found]:
    """A certificate file, or an item record (recognised by its `item` and `result` fields)."""
    try:
        data = read_untrusted(path, MAX_RECORD_BYTES + 1)
    except OSError as exc:
        return [Found(origin=str(path), certificate=None, problem=f"cannot read {path}: {exc.strerror or exc}")]
    if len(data) > MAX_RECORD_BYTES:
        return [Found(origin=str(path), certificate=None, problem=f"{path} is over {MAX_RECORD_BYTES} bytes; not read")]
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        raw = None
    if isinstance(raw, dict) and "item" in raw and "result" in raw:
        try:
            return _of_record(path, ItemRecord.model_validate(raw))
        except ValidationError as exc:
            problem = f"not an item record: {describe_validation_error(exc)}"
            return [Found(origin=str(path), certificate=None, problem=problem)]
    try:
        return [Found(origin=str(path), certificate=parse_certificate(data))]
    except CertificateError as exc:
        return [Found(origin=str(path), certificate=None, problem=str(exc))]
