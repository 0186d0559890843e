"""Endpoint overhead: a model call through the harness's metered endpoint (session/endpoint.py, as an
installed agent such as opencode reaches its model) against the same call made directly through
litellm, to the same local scripted demo server, as a ratio of medians. Target: at most 1.1.

    python -m benchmarks.endpoint_overhead [--repeat 50] [--quick] [--json FILE]

The direct side is `litellm.completion` to the demo server, in this process. The endpoint side is one
HTTP request (a streamed chat-completions request, as opencode sends) over the endpoint's Unix socket,
parsed and answered by the endpoint, whose handler makes the same litellm call: the socket, h11, the
JSON and the server-sent-event reply are what it adds. Not included: the forwarder inside a sandbox
(a byte relay on loopback) and the Meter's booking (a token count and two additions), which a session
adds on top. The calls of the two sides alternate; median and p90 seconds per call are reported.
"""

import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, parser, report, rounded

TARGET = 1.1
MODEL = "demo/bench_endpoint"


class Timings(BaseModel):
    direct: list[float]
    endpoint: list[float]
    quick: bool = False


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def post(path: Path, body: dict) -> bytes:
    data = json.dumps(body).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        conn.sendall(head.encode() + data)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    if not reply.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"the endpoint answered {reply[:200]!r}")
    return reply


def measure(calls: int, quick: bool) -> Timings:
    from pytest_predbench.session.demo.server import Script, Turn, shared_server
    from pytest_predbench.session.endpoint import Endpoint
    from pytest_predbench.session.model_settings import import_litellm

    litellm = import_litellm()
    server = shared_server()
    name = server.add_script("demo-bench-endpoint", Script(turns=[Turn(say="ok")] * (2 * calls + 10)))
    kwargs = dict(api_base=server.api_base(name), api_key="predbench-demo", max_tokens=64, timeout=30, max_retries=0)
    messages = [{"role": "user", "content": "Say ok. " * 200}]

    def direct() -> dict:
        return litellm.completion(model=f"openai/{name}", messages=messages, **kwargs).model_dump()

    def handler(body: dict) -> dict:
        return litellm.completion(model=f"openai/{name}", messages=body["messages"], **kwargs).model_dump()

    with tempfile.TemporaryDirectory(prefix="predbench-perf-ep-") as tmp:
        endpoint = Endpoint(Path(tmp) / "socket", handler)
        try:
            direct()  # warm both paths, not counted
            post(endpoint.path, {"stream": True, "messages": messages})
            times: dict[str, list[float]] = {"direct": [], "endpoint": []}
            for n in range(calls):
                sides = [
                    ("direct", direct),
                    ("endpoint", lambda: post(endpoint.path, {"stream": True, "messages": messages})),
                ]
                for side, call in sides if n % 2 == 0 else sides[::-1]:
                    start = time.perf_counter()
                    call()
                    times[side].append(time.perf_counter() - start)
        finally:
            endpoint.close()
    return Timings(direct=rounded(times["direct"], 6), endpoint=rounded(times["endpoint"], 6), quick=quick)


def judge(t: Timings) -> Figure:
    direct, endpoint = statistics.median(t.direct), statistics.median(t.endpoint)
    return Figure(
        key="endpoint_overhead",
        title="endpoint overhead",
        value=endpoint / direct,
        target=TARGET,
        note=(
            f"a model call through the metered endpoint's socket {endpoint * 1000:.1f} ms median "
            f"(p90 {p90(t.endpoint) * 1000:.1f} ms), direct through litellm {direct * 1000:.1f} ms "
            f"(p90 {p90(t.direct) * 1000:.1f} ms), same local demo server; {len(t.direct)} calls each"
        ),
        raw=t.model_dump(),
        quick=t.quick,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=50).parse_args(argv)
    calls = 3 if args.quick else max(1, args.repeat)
    return report("endpoint overhead", lambda: judge(measure(calls, args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
