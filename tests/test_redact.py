"""The gateway's rewriting of host paths in pred's output (session/redact.py), on its own."""

from pytest_predbench.session.redact import CRATES_DIR, EXTRACTOR_DIR, HOLD_BYTES, Redaction, rules
from pytest_predbench.session.sandbox import SOURCE_DIR

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
