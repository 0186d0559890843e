#!/usr/bin/python3
"""predbench-model-forwarder PORT SOCKET: inside the sandbox, relay 127.0.0.1:PORT to SOCKET.

The sandbox has its own network namespace with loopback only; the agent's HTTP client speaks TCP,
the harness's metered model endpoint (session/endpoint.py) a Unix socket bound into the sandbox.
This relays bytes both ways and understands nothing: every check is the harness's. It exits 0 once
it listens (a child keeps serving), so `forwarder PORT SOCKET && agent ...` never races it.
Standard library only (it runs on the sandbox's read-only system Python).
"""

import os
import socket
import sys
import threading


def pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: predbench-model-forwarder PORT SOCKET", file=sys.stderr)
        return 2
    port, path = int(sys.argv[1]), sys.argv[2]
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", port))
    server.listen(16)
    if os.fork() != 0:
        return 0  # listening: the agent may start
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        client, _ = server.accept()
        threading.Thread(target=relay, args=(client, path), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
