"""The metered model endpoint's HTTP side (session/endpoint.py): what the agent sends is hostile.

The attack class: any bytes an agent inside the sandbox can write to the socket. The mechanism:
h11 parses them, the head and body are bounded before they are read whole, and only a JSON object
with a `messages` list reaches the handler (the one that books and makes model calls). The
property test draws requests of the class at random and checks that the handler is reached only
by such a request, and that every connection gets an HTTP answer.
"""

import json
import socket
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_predbench.session import endpoint
from pytest_predbench.session.endpoint import Endpoint, Refused, sse_chunks

ANSWER = {
    "id": "chatcmpl-1",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "running",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}


class Recorder:
    def __init__(self, refuse: bool = False):
        self.seen: list[dict] = []
        self.refuse = refuse
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> dict:
        with self.lock:
            self.seen.append(body)
        if self.refuse:
            raise Refused("predbench: over the cap")
        return ANSWER


@pytest.fixture
def served(tmp_path: Path):
    recorder = Recorder()
    server = Endpoint(tmp_path / "model" / "socket", recorder)
    yield server, recorder
    server.close()


def exchange(path: Path, raw: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(path))
        try:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed before reading it all
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def post(body: bytes, target: str = "/v1/chat/completions", extra: str = "") -> bytes:
    head = f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def test_a_streamed_request_gets_its_answer_as_server_sent_events(served):
    server, recorder = served
    reply = exchange(
        server.path, post(json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode())
    )
    assert status(reply) == 200 and b"text/event-stream" in reply
    events = [
        json.loads(line[6:])
        for line in reply.split(b"\r\n\r\n", 1)[1].decode().splitlines()
        if line.startswith("data: {")
    ]
    assert events == sse_chunks(ANSWER)
    assert events[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "bash"
    assert events[-1]["usage"] == ANSWER["usage"] and reply.rstrip().endswith(b"data: [DONE]")
    assert recorder.seen == [{"messages": [{"role": "user", "content": "hi"}], "stream": True}]


def test_a_plain_request_gets_json(served):
    server, _ = served
    reply = exchange(server.path, post(json.dumps({"messages": []}).encode()))
    assert status(reply) == 200 and json.loads(reply.split(b"\r\n\r\n", 1)[1]) == ANSWER


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (post(b"{}", target="/v1/models"), 404),
        (b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (post(b"not json"), 400),
        (post(b'{"messages": "no list"}'), 400),
        (post(b"[1, 2]"), 400),
        (post(b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), 400),  # nested too deep to decode
        (post(b'{"messages": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"), 413),  # too many arrays: not decoded
        (b"\x00\x01garbage\r\n\r\n", 400),
        (post(b"{}", extra="X-Big: " + "a" * (endpoint.MAX_HEAD_BYTES + endpoint.READ_CHUNK + 10) + "\r\n"), 431),
    ],
)
def test_bad_requests_never_reach_the_handler(served, raw, expected):
    server, recorder = served
    assert status(exchange(server.path, raw)) == expected
    assert recorder.seen == []


def test_a_body_over_the_bound_is_refused_unread(served):
    """Announced too big: refused from the head. Sent chunked past the bound: refused as it grows."""
    server, recorder = served
    big = endpoint.MAX_BODY_BYTES + 1
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n".encode()
    assert status(exchange(server.path, head + b"x" * 1024)) == 413
    chunk = b"x" * (1024 * 1024)
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * 9
    assert status(exchange(server.path, chunked)) == 413
    assert recorder.seen == []


def test_a_request_that_does_not_arrive_in_time_is_cut_off(tmp_path, monkeypatch):
    monkeypatch.setattr(endpoint, "REQUEST_SECONDS", 0.2)
    recorder = Recorder()
    server = Endpoint(tmp_path / "socket", recorder)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(server.path))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            reply = s.recv(65536)  # the server answers, never waiting for the other 99 bytes
        assert status(reply) == 408 and recorder.seen == []
    finally:
        server.close()


def test_a_refusal_is_a_400_with_its_reason(tmp_path):
    server = Endpoint(tmp_path / "socket", Recorder(refuse=True))
    try:
        reply = exchange(server.path, post(json.dumps({"messages": []}).encode()))
        assert status(reply) == 400 and b"over the cap" in reply
    finally:
        server.close()


REQUEST_PARTS = st.one_of(
    st.binary(max_size=300),
    st.builds(
        post,
        st.one_of(
            st.binary(max_size=200),
            st.builds(
                lambda v: json.dumps(v).encode(),
                st.dictionaries(
                    st.sampled_from(["messages", "stream", "tools"]),
                    st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=3), st.text(max_size=5)),
                ),
            ),
        ),
        st.sampled_from(["/v1/chat/completions", "/chat/completions", "/v1/models", "/", "*"]),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=REQUEST_PARTS)
def test_any_bytes_get_an_answer_and_only_a_chat_request_reaches_the_handler(served, raw):
    server, recorder = served
    before = len(recorder.seen)
    reply = exchange(server.path, raw)
    code = status(reply)
    if len(recorder.seen) > before:
        body = recorder.seen[-1]
        assert isinstance(body, dict) and isinstance(body.get("messages"), list) and code == 200
    else:
        assert 400 <= code < 600
