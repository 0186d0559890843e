#!/usr/bin/python3 -IS
"""pred (or pred-extract) as the agent's sandbox has it: the real binary is not here. The call —
its tool, its working directory and its arguments, NUL-separated, with its stdin, stdout and
stderr themselves passed along (SCM_RIGHTS) — goes to the harness's gateway, which books it
against the session's pred-call limit, runs the real one on the files under /scratch, and answers
`EXIT\\nMESSAGE`. Only built-in modules (no `socket`, no `json`): every call pays this start-up."""

import _socket
import os
import sys

TOOL = "pred"
SOCKET = "/predbench/gateway/socket"


def main() -> int:
    try:
        cwd = os.getcwdb()
    except OSError:
        cwd = b""
    request = b"\0".join([TOOL.encode(), cwd, *map(os.fsencode, sys.argv[1:])])
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        conn.connect(SOCKET)
        conn.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        reply = conn.recv(65536)
    except OSError as exc:
        sys.stderr.write(f"{TOOL}: the harness's pred gateway did not answer: {exc}\n")
        return 125
    code, _, message = reply.partition(b"\n")
    if message:
        sys.stderr.write(f"{TOOL}: {message.decode('utf-8', 'replace')}\n")
    return int(code) if code.isdigit() else 125


if __name__ == "__main__":
    sys.exit(main())
