"""A seccomp deny-list for both of a session's sandboxes, built here as a classic BPF program (no
libseccomp: the program is a few dozen 8-byte instructions) and handed to `bwrap --seccomp FD`.

The namespaces, the dropped capabilities and the unprivileged uid already refuse most of what is
listed; the filter takes the kernel's attack surface away from what a bug-hunting agent never needs,
whatever a kernel bug would let through the other layers: keyrings, BPF, perf, userfaultfd,
io_uring (whose operations seccomp cannot see), ptrace and cross-process memory access, module and
kexec loading, mounts and namespaces, the clock, swap, reboot, quotas, handles to host files. Each
such call fails with EPERM. Only x86-64 has the table: on another architecture there is no filter
(`program` is None) and the sandbox says so (docs/sandbox.md); on x86-64, the i386 and x32 system
call ABIs are refused whole (they would bypass a table of x86-64 numbers).
"""

import errno
import os
import platform
import struct

DENIED_X86_64 = {
    "ptrace": 101, "syslog": 103, "uselib": 134, "pivot_root": 155, "_sysctl": 156,
    "adjtimex": 159, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "iopl": 172, "ioperm": 173, "create_module": 174, "init_module": 175, "delete_module": 176,
    "get_kernel_syms": 177, "query_module": 178, "quotactl": 179, "nfsservctl": 180, "acct": 163,
    "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}  # fmt: skip
"""The refused calls, by their x86-64 numbers (asm/unistd_64.h)."""

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000 | errno.EPERM
NR, ARCH = 0, 4  # offsets in struct seccomp_data


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The filter as `struct sock_filter[]`, for this machine; None where there is no table."""
    if platform.machine() != "x86_64":
        return None
    numbers = sorted(DENIED_X86_64.values())
    checks = len(numbers) + 1  # the x32 check, then one per number; each jumps to the deny at the end
    ops = [_op(LD_W_ABS, ARCH), _op(JEQ_K, AUDIT_ARCH_X86_64, jt=1), _op(RET_K, RET_ERRNO), _op(LD_W_ABS, NR)]
    ops.append(_op(JGE_K, X32_BIT, jt=checks))
    ops += [_op(JEQ_K, nr, jt=checks - 1 - i) for i, nr in enumerate(numbers)]
    ops += [_op(RET_K, RET_ALLOW), _op(RET_K, RET_ERRNO)]
    return b"".join(ops)


def program_fd() -> int | None:
    """A memfd holding the filter, for `bwrap --seccomp FD` (the caller closes it); None: no filter."""
    code = program()
    if code is None:
        return None
    fd = os.memfd_create("seccomp", 0)
    os.write(fd, code)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
