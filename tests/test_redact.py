"""The gateway's rewriting of host paths in pred's output (session/redact.py, with the rules of
verify/hostpaths.py), on its own."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_predbench.session.redact import HOLD_BYTES, Redaction
from pytest_predbench.session.sandbox import SOURCE_DIR
from pytest_predbench.verify.hostpaths import CRATES_DIR, EXTRACTOR_DIR, rules

SOURCE = "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/problemreductions-0.5.0"
PANIC = f"\nthread 'main' (7) panicked at {SOURCE}/src/topology/graph.rs:142:13:\nedge (0, 7)\n".encode()


def relayed(chunks: list[bytes], source: str = SOURCE) -> bytes:
    redaction = Redaction(rules(source))
    return b"".join(redaction.feed(chunk) for chunk in [*chunks, b""])


def test_a_panic_names_the_file_where_the_agent_sees_it_even_split_across_reads():
    whole = relayed([PANIC])
    assert (
        whole == f"\nthread 'main' (7) panicked at {SOURCE_DIR}/src/topology/graph.rs:142:13:\nedge (0, 7)\n".encode()
    )
    for cut in range(1, len(PANIC)):  # every split of the stream into two reads
        assert relayed([PANIC[:cut], PANIC[cut:]]) == whole
    assert SOURCE.encode() in PANIC  # contrast: what pred wrote


def test_other_crates_and_the_extractor_get_neutral_prefixes():
    text = (
        b"at /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_json-1.0.1/src/de.rs:3:1\n"
        b"at /work/wt/issue-20/pytest_predbench/verify/extractor/src/main.rs:9:5\n"
        b"at /opt/cargo/registry/src/index.crates.io-x/problemreductions-0.5.0/src/lib.rs:1:1\n"
    )
    out = relayed([text], source="/elsewhere/problemreductions-0.5.0")
    assert (
        out
        == (
            f"at {CRATES_DIR}/serde_json-1.0.1/src/de.rs:3:1\n"
            f"at {EXTRACTOR_DIR}/src/main.rs:9:5\n"
            f"at {SOURCE_DIR}/src/lib.rs:1:1\n"
        ).encode()
    )


def test_data_without_host_paths_passes_unchanged_and_whole():
    data = b'{"config": [1, 0],\n "path": "/scratch/x.json"}' + b"x" * (HOLD_BYTES + 10)
    assert relayed([data[:7], data[7:100], data[100:]]) == data


# -- hostile output: linear time, the same rewriting ----------------------------------------------------

OLD_PATH = rb"[^\s:'\"`]*"
OLD_RULES = [  # the backtracking patterns redact.py had: the oracle for realistic output
    (re.compile(rb"/" + OLD_PATH + rb"/registry/src/[^/\s]+/problemreductions-[0-9][^/\s]*"), SOURCE_DIR.encode()),
    (re.compile(rb"/" + OLD_PATH + rb"/registry/src/[^/\s]+"), CRATES_DIR.encode()),
    (re.compile(rb"/" + OLD_PATH + rb"/pytest_predbench/verify/extractor"), EXTRACTOR_DIR.encode()),
]


def old_rewrite(data: bytes, source: str = SOURCE) -> bytes:
    data = data.replace(source.encode(), SOURCE_DIR.encode())
    for pattern, replacement in OLD_RULES:
        data = pattern.sub(replacement, data)
    return data


def test_a_long_run_of_slashes_is_rewritten_in_linear_time():
    """Tried at every slash, `/[^\\s]*/registry/src/` costs the square of the run: 2 MiB of slashes
    after a registry part would take hours; rewritten with `find`, one pass."""
    attack = b"at /registry/src/" + b"/" * (2 << 20) + b" /pytest_predbench/verify/extractor" + b"/" * (2 << 20)
    out = relayed([attack])
    assert out.startswith(b"at /registry/src/") and out.endswith(b"/" * (2 << 20))  # nothing to rewrite here
    small = attack[:64] + b"x/registry/src/i/serde-1/src/a.rs:1:2"  # contrast: a real path still rewritten
    assert relayed([b"at /h" + small]).endswith(f"{CRATES_DIR}/serde-1/src/a.rs:1:2".encode())


segment = st.text(alphabet="abcz.-_0123456789", min_size=1, max_size=8)
path_line = st.builds(
    lambda prefix, index, crate, version, file, noise: (
        f"{noise} at /{'/'.join(prefix)}/registry/src/{index}/{crate}-{version}/src/{file}.rs:3:7 {noise}\n"
    ).encode(),
    st.lists(segment, min_size=1, max_size=4),
    segment,
    st.sampled_from(["problemreductions", "serde", "problemreductionsx", "num"]),
    st.sampled_from(["0.5.0", "1.2", "x"]),
    segment,
    st.text(alphabet="ab /:'\"\t", max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(path_line, st.binary(max_size=40)), max_size=6))
def test_realistic_output_is_rewritten_as_the_old_patterns_did(lines):
    data = b"".join(lines)
    assert relayed([data]) == old_rewrite(data)
