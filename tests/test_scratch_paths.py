"""pred's working directory and file arguments are judged by what they point to, not by their text.

Attacks: a symlink in /scratch to /predbench/libexec (the real binaries, in pred's sandbox) as the
working directory, accepted by the old lexical check; a file argument outside /scratch, directly,
by `..` or through a chain of links. The property test builds random trees of directories and
relative links and checks the resolution against the kernel's own (os.path.realpath).
"""

import errno
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_predbench.session.gateway import _outside, _request
from pytest_predbench.session.scratch_paths import Outside, resolve

TOOLS = {"pred": Path("/bin/true")}


def test_a_link_to_libexec_is_no_working_directory(tmp_path):
    (tmp_path / "lib").symlink_to("/predbench/libexec")
    (tmp_path / "sub").mkdir()
    (tmp_path / "back").symlink_to("/scratch/sub")
    refused = _request(b"pred\0/scratch/lib\0--version", [0, 1, 2], TOOLS, tmp_path)
    assert isinstance(refused, str) and "cd there first" in refused
    assert os.path.normpath("/scratch/lib").startswith("/scratch")  # contrast: what the lexical check saw
    assert _request(b"pred\0/scratch/back\0--version", [0, 1, 2], TOOLS, tmp_path) == (
        "pred",
        [b"--version"],
        "/scratch/sub",
    )


@pytest.mark.parametrize(
    "arg", ["/etc/passwd", "../../etc/passwd", "link.json", "--input=/predbench/libexec/pred", "hop/x"]
)
def test_a_file_argument_outside_the_scratch_is_refused(tmp_path, arg):
    (tmp_path / "link.json").symlink_to("/etc/passwd")
    (tmp_path / "hop").symlink_to("../..")
    why = _outside(tmp_path, "/scratch", arg)
    assert why and "pred's files must be in /scratch" in why, why


@pytest.mark.parametrize(
    "arg", ["mis.json", "sub/out.json", "/scratch/mis.json", "MIS/UnitDiskGraph", "0-1,1-2", "-", "--to=MVC"]
)
def test_arguments_inside_the_scratch_or_no_path_pass(tmp_path, arg):
    (tmp_path / "mis.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    assert _outside(tmp_path, "/scratch", arg) is None


NAMES = st.sampled_from(["a", "b", "c"])
TARGETS = st.sampled_from([".", "..", "../..", "a", "b/c", "../a", "../../x", "c/..", "a/../.."])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tree=st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=3), st.one_of(st.none(), TARGETS)), max_size=8),
    path=st.lists(st.sampled_from(["a", "b", "c", "..", "."]), max_size=5),
)
def test_resolution_agrees_with_the_kernel(tmp_path_factory, tree, path):
    root = tmp_path_factory.mktemp("t")
    scratch = root / "scratch"
    scratch.mkdir()
    for parts, link in tree:
        where = scratch.joinpath(*parts)
        try:
            if link is None:
                where.mkdir(parents=True, exist_ok=True)
            else:
                where.parent.mkdir(parents=True, exist_ok=True)
                where.symlink_to(link)
        except OSError:
            pass
    relative = "/".join(path) or "."
    real = os.path.realpath(scratch / relative)
    inside = real == str(scratch) or real.startswith(str(scratch) + "/")
    try:
        os.path.realpath(scratch / relative, strict=True)
        loop = False
    except OSError as exc:
        loop = exc.errno == errno.ELOOP
    try:
        got = resolve(scratch, relative)
    except Outside:
        assert not inside or loop, (relative, real)
        return
    assert inside and got == "/scratch" + real[len(str(scratch)) :], (relative, real, got)
