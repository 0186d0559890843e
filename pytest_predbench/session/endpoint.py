"""The metered model endpoint: how an installed agent (opencode) reaches its model.

An installed agent calls its provider itself; predbench's promises (a hard dollar ceiling, every
call booked, keys never in the sandbox) were built around a loop whose every call passes through
the harness. So the agent gets no provider: its sandbox has no network, and its one way to a model
is a Unix socket bound into the sandbox (read-only: connect, not replace), served here, in the
harness. A tiny forwarder inside the sandbox's own network namespace
(client/predbench_model_forwarder.py) turns the agent's loopback HTTP into connections to it.

Each request is hostile input: at most MAX_CONNECTIONS at once, its head and body bounded
(MAX_HEAD_BYTES, MAX_BODY_BYTES) and read within REQUEST_SECONDS, parsed by a real HTTP parser
(h11), and only `POST .../chat/completions` with a JSON object whose `messages` is a list is
served. Of the body only `messages`, `tools` and `tool_choice` are forwarded, rebuilt as a text
conversation (chat_request.py); everything else
(max_tokens, the timeout, the key, the provider) is the harness's. The call is made by
`MeteredCalls`, one at a time, with the budget code a mini-swe-agent call uses (agent.Meter):
the worst case reserved before the call, refused when it could cross the session's ceiling, the
actual cost settled from the provider's usage after. A refusal is a 400 with a one-line reason
(the agent should not retry it) and ends the session: every later request is refused too.
"""

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h11

MAX_CONNECTIONS = 4
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
"""A long session's prompt is far below this; a flood of bytes stops here, unread."""
MAX_CONTAINERS = 131072
"""Objects and arrays in a body (counted as its `{` and `[` bytes, strings' included): decoded, an
8 MiB body of `{},` is ~210 MB of the harness's memory, outside every bound of the session's; a
long session's prompt, code and all, has far fewer."""
PARSING = threading.Lock()
"""One body decoded at a time in this process: what a flood of requests costs the harness's memory
is one body's, not MAX_CONNECTIONS'."""
REQUEST_SECONDS = 30.0
"""The whole request (head and body) must arrive within this (a slow drip is cut off)."""
READ_CHUNK = 65536


class Refused(Exception):
    """A call the harness will not make; `status` is the HTTP status the agent gets."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


Handler = Callable[[dict], dict]
"""A chat-completions request body -> the chat-completion response body (Refused: not made)."""


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def read_request(conn: socket.socket, deadline: float) -> dict:
    """One HTTP request from `conn`, parsed by h11, bounded in size and time: its JSON body.
    BadRequest (with the status to answer) for anything but a bounded POST of a JSON object to
    .../chat/completions."""
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    body = bytearray()
    head = 0
    """Bytes received before the request's head was parsed."""
    request: h11.Request | None = None
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as exc:
            raise BadRequest(exc.error_status_hint, f"malformed HTTP request: {exc}") from None
        if event is h11.NEED_DATA:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BadRequest(408, "the request did not arrive in time")
            conn.settimeout(left)
            try:
                data = conn.recv(READ_CHUNK)
            except TimeoutError:
                raise BadRequest(408, "the request did not arrive in time") from None
            if request is None:  # h11 bounds a head that arrives in pieces; this, one that arrives whole
                head += len(data)
                if head > MAX_HEAD_BYTES + READ_CHUNK:
                    raise BadRequest(431, f"request head over {MAX_HEAD_BYTES} bytes")
            parser.receive_data(data)
            if not data and request is None:
                raise BadRequest(400, "the connection closed before a request")
            continue
        if isinstance(event, h11.Request):
            request = event
            if event.method != b"POST" or not event.target.split(b"?")[0].rstrip(b"/").endswith(b"/chat/completions"):
                raise BadRequest(404, "only POST .../chat/completions is served")
            length = dict(event.headers).get(b"content-length")
            if length is not None and int(length) > MAX_BODY_BYTES:
                raise BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
        elif isinstance(event, h11.EndOfMessage):
            break
        elif isinstance(event, h11.ConnectionClosed):
            raise BadRequest(400, "the connection closed mid-request")
    if body.count(b"{") + body.count(b"[") > MAX_CONTAINERS:
        raise BadRequest(413, f"request body has over {MAX_CONTAINERS} objects and arrays")
    try:
        with PARSING:
            parsed = json.loads(bytes(body))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        raise BadRequest(400, "the request body is not JSON") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("messages"), list):
        raise BadRequest(400, "the request body is not a chat-completions request (no messages list)")
    return parsed


def sse_chunks(response: dict) -> list[dict]:
    """A chat completion as the chunks of a streamed one (the agent asked for a stream; the harness
    makes the call whole, so its usage is known before the first byte is sent)."""
    base = {k: response.get(k) for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = []
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": "assistant"}
        if message.get("content"):
            delta["content"] = message["content"]
        if message.get("reasoning_content"):
            delta["reasoning_content"] = message["reasoning_content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": i, "id": c.get("id"), "type": "function", "function": c.get("function")}
                for i, c in enumerate(message["tool_calls"])
            ]
        index = choice.get("index", 0)
        chunks.append(base | {"choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        chunks.append(base | {"choices": [{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}]})
    if chunks and response.get("usage"):
        chunks[-1]["usage"] = response["usage"]
    return chunks


REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    408: "Request Timeout",
    413: "Content Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _send(conn: socket.socket, status: int, body: bytes, content_type: str) -> None:
    """One whole response, then the connection closes (each call connects anew)."""
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    conn.sendall(head.encode() + body)


LINGER_SECONDS = 1.0
LINGER_BYTES = 2 * MAX_BODY_BYTES


def _linger(conn: socket.socket) -> None:
    """After an early answer: stop sending and read what the client is still sending (bounded in
    time and bytes), so closing with unread data does not reset the connection before the client
    has read the answer."""
    try:
        conn.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + LINGER_SECONDS
        drained = 0
        while drained < LINGER_BYTES and (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            data = conn.recv(READ_CHUNK)
            if not data:
                return
            drained += len(data)
    except OSError:
        pass


def error_body(status: int, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "predbench_refusal", "code": status}}).encode()


class Endpoint:
    """Serve `handler` on a Unix socket at `socket_path`, a thread per connection (at most
    MAX_CONNECTIONS; past that an immediate 503), one request per connection."""

    def __init__(self, socket_path: Path, handler: Handler):
        self.path = Path(socket_path)
        self.handler = handler
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        os.chmod(self.path, 0o777)  # the sandbox's uid connects; the directory is bound read-only
        self.sock.listen(16)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.closed = threading.Event()
        self.bad_requests = 0
        self.thread = threading.Thread(target=self._accept, name="predbench-model-endpoint", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if not self.slots.acquire(blocking=False):
                try:
                    _send(conn, 503, error_body(503, "busy: too many connections"), "application/json")
                except OSError:
                    pass
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            try:
                request = read_request(conn, time.monotonic() + REQUEST_SECONDS)
            except (BadRequest, ValueError) as exc:
                self.bad_requests += 1
                status = exc.status if isinstance(exc, BadRequest) else 400
                _send(conn, status, error_body(status, str(exc)[:300]), "application/json")
                _linger(conn)
                return
            conn.settimeout(None)
            try:
                response = self.handler(request)
            except Refused as exc:
                _send(conn, exc.status, error_body(exc.status, str(exc)), "application/json")
                return
            except Exception as exc:  # the harness's own bug, met by a request: one line, never a traceback
                message = f"predbench: the request could not be served ({type(exc).__name__})"
                _send(conn, 500, error_body(500, message), "application/json")
                return
            if request.get("stream"):
                text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in sse_chunks(response)) + "data: [DONE]\n\n"
                _send(conn, 200, text.encode(), "text/event-stream")
            else:
                _send(conn, 200, json.dumps(response).encode(), "application/json")
        except OSError:
            pass  # the agent went away
        finally:
            conn.close()
            self.slots.release()

    def close(self) -> None:
        self.closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=5)
        self.path.unlink(missing_ok=True)
