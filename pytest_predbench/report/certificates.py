"""Every certificate in what a user names: certificate files, directories of them, item records, and
whole run directories (every certificate each session submitted).

`predbench verify` takes any of these, so that a run can be re-checked after the fact with one
command. Each certificate keeps where it came from (`items/a__x-s01.json#2`: the record's second
certificate), and what cannot be read as one is kept too, with why, to be reported as rejected.
"""

import json
from pathlib import Path

from pydantic import ValidationError

from pytest_predbench.files import CorruptStateError, json_shape_problem, read_untrusted
from pytest_predbench.session.submission import MAX_SUBMISSIONS
from pytest_predbench.state.records import ItemRecord, read_items
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify.batch import Found
from pytest_predbench.verify.certificate import (
    MAX_CERTIFICATE_BYTES,
    MAX_NESTING_DEPTH,
    CertificateError,
    describe_validation_error,
    parse_certificate,
)

MAX_RECORD_BYTES = 64 * 1024**2
"""An item record holds its certificates and their verdicts' evidence: far larger than one certificate."""
MAX_RECORD_CONTAINERS = MAX_SUBMISSIONS * (MAX_CERTIFICATE_BYTES // 2) + 2**17
"""JSON arrays and objects an item record may hold before it is parsed: its certificates at their
largest, each a file of nothing but `[]` (two bytes each), and room for its verdicts' checks. Parsing
costs memory per container, so this, not MAX_RECORD_BYTES, bounds what reading a file may hold."""
MAX_RECORD_DEPTH = MAX_NESTING_DEPTH + 8
"""A certificate's nesting limit, and the levels of the record around it."""


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
    if len(data) > MAX_CERTIFICATE_BYTES:  # then only an item record: bounded before it is parsed
        shape = json_shape_problem(data, MAX_RECORD_CONTAINERS, MAX_RECORD_DEPTH)
        if shape:
            problem = (
                f"{path} is {len(data)} bytes, over the {MAX_CERTIFICATE_BYTES}-byte limit of a certificate, "
                f"and no item record either ({shape}); not parsed"
            )
            return [Found(origin=str(path), certificate=None, problem=problem)]
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
