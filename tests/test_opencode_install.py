"""opencode's install (session/opencode_install.py): only the pinned bytes are ever installed."""

import io
import tarfile
from pathlib import Path

import pytest

from pytest_predbench.session import opencode_install
from pytest_predbench.session.opencode_install import OpenCodeInstallError, extract, integrity_of


def tarball(path: Path, binary: bytes, *, member: str = opencode_install.MEMBER) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = len(binary)
        tar.addfile(info, io.BytesIO(binary))
    return path


def test_the_pinned_tarball_installs_its_binary(tmp_path):
    package = tarball(tmp_path / "p.tgz", b"\x7fELF the binary")
    target = extract(package, tmp_path / "install", expected=integrity_of(package))
    assert target == tmp_path / "install" / "bin" / "opencode"
    assert target.read_bytes() == b"\x7fELF the binary" and target.stat().st_mode & 0o111


def test_a_tarball_with_other_bytes_is_refused_and_nothing_is_installed(tmp_path):
    pinned = tarball(tmp_path / "pinned.tgz", b"\x7fELF the binary")
    other = tarball(tmp_path / "other.tgz", b"\x7fELF something else")
    with pytest.raises(OpenCodeInstallError, match="not the pinned"):
        extract(other, tmp_path / "install", expected=integrity_of(pinned))
    assert not (tmp_path / "install").exists()


def test_the_pin_is_npm_s_sha512_notation():
    assert opencode_install.INTEGRITY.startswith("sha512-") and len(opencode_install.INTEGRITY) == 95


def test_an_unpinned_version_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PREDBENCH_CACHE", str(tmp_path))
    with pytest.raises(OpenCodeInstallError, match="not pinned"):
        opencode_install.ensure("0.0.1")
