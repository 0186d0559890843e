"""Every bound on a harness step over something the agent wrote, in one place (docs/sandbox.md
states them, and its threat-model table names the test that attacks each).

The harness reads what the agent leaves (spooled files, the gateway's requests, command output)
outside every timeout and cgroup of the session; a step that is unbounded in count, size, depth or
time lets one session stall or crash the harness. Each bound here is what that step may cost at most.
"""

MIB = 1024**2

SPOOL_ENTRIES = 64
"""Spool entries looked at after one command (the rest are removed unread, and the model is told)."""
SPOOL_BYTES = 1 * MIB
"""Bytes read from the spool after one command, all files together (each inode read once)."""

RELAY_WRITE_SECONDS = 5.0
"""How long the gateway waits for a descriptor the agent handed it to take more output (a full
pipe nobody reads, a FIFO with a shrunk buffer) before it stops relaying to it."""

SINK_HELD_BYTES = 1 * MIB
"""pred output the gateway holds for a client descriptor that is not taking it yet (more is dropped:
a client that stops reading loses the rest, as before)."""

COMMAND_BYTES = 128 * 1024 - 1
"""The longest command the harness hands to a shell (the kernel holds one argument of at most
128 KiB, its NUL included); longer, it is refused as the command's result."""

SHM_BYTES = 256 * MIB
"""SysV shared memory of one sandbox's IPC namespace (shmall/shmmax): it outlives the processes
that made it, so it is kept well inside the session's memory bound."""
SHM_SEGMENTS = 64
"""shmmni: SysV shared-memory segments per sandbox."""
MSG_QUEUES = 16
"""msgmni: SysV message queues per sandbox (each holds at most msgmnb bytes)."""
MSG_QUEUE_BYTES = 64 * 1024
"""msgmnb: bytes one message queue may hold."""
