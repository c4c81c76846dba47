"""Device files a job may not open, under cgroup v2: a BPF_CGROUP_DEVICE program.

cgroup v1 has a ``devices`` controller (``devices.deny "c 195:2 rwm"``);
cgroup v2 has none: the kernel asks a BPF program of type
BPF_PROG_TYPE_CGROUP_DEVICE, attached to the cgroup, at every open or mknod
of a device file by a process in it or below it, and refuses the access
(EPERM) where the program returns 0. Slurm's task/cgroup does the same in
v2, with a program it assembles itself (cgroup_v2.c); runc and crun too.

``program(rules)`` assembles ours from the same rules v1 takes ("c 195:2",
"b 8:*"): each denied (type, major, minor) returns 0, anything else 1, so
it denies exactly what v1's devices.deny denied and lets the rest through
(v1's default for a new cgroup is to allow all). Read, write and mknod are
all refused, as "rwm". ``attach(cgroup_dir, rules)`` loads it with bpf(2)
and attaches it with BPF_F_ALLOW_MULTI, so that a program the init system
attached above (systemd's DevicePolicy=) keeps running too: every attached
program must allow an access. The program stays attached, and alive, as
long as the cgroup: closing our descriptor after attaching is what the
kernel expects, and the job's steps below inherit it.

Why no BPF library: bcc and libbpf compile C with clang at run time or need
a compiled object; the program here is fixed-shape, five instructions a
rule, and assembling it is 30 lines of ``struct.pack``. bpf(2) goes through
ctypes (no Python binding of it is packaged). The verifier checks it at
load time, and the tests load it into a real kernel and open real device
files under it.

The program, for rules R1..Rn (r1 = struct bpf_cgroup_dev_ctx {u32
access_type; u32 major; u32 minor}, type in the low 16 bits of
access_type)::

    r2 = *(u32 *)(r1 + 0); r2 &= 0xffff       type (1 block, 2 char)
    r4 = *(u32 *)(r1 + 4)                     major
    r5 = *(u32 *)(r1 + 8)                     minor
    Ri: if r2 != type  goto next              (omitted for a wildcard)
        if r4 != major goto next
        if r5 != minor goto next
        r0 = 0; exit                          denied
    r0 = 1; exit                              anything else: allowed
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# linux/bpf.h
BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6
BPF_F_ALLOW_MULTI = 2
DEV_BLOCK, DEV_CHAR = 1, 2          # BPF_DEVCG_DEV_*
# syscall numbers of bpf(2)
SYS_BPF = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351}

# instruction opcodes (BPF_CLASS | BPF_OP | BPF_SRC)
_LDX_W = 0x61          # BPF_LDX | BPF_MEM | BPF_W
_AND_K = 0x57          # BPF_ALU64 | BPF_AND | BPF_K
_MOV_K = 0xB7          # BPF_ALU64 | BPF_MOV | BPF_K
_JNE_K = 0x55          # BPF_JMP | BPF_JNE | BPF_K
_EXIT = 0x95           # BPF_JMP | BPF_EXIT

Rule = tuple[int, int | None, int | None]     # (type or 0 = any, major, minor); None = any


class DeviceFilterError(OSError):
    """The program could not be loaded or attached (errno and the kernel's words)."""


def parse_rule(text: str) -> Rule:
    """ "c 195:2" -> (DEV_CHAR, 195, 2); "b 8:*" -> (DEV_BLOCK, 8, None); "a" -> any.
    The form of v1's devices.deny, without its access letters."""
    parts = text.split()
    kind = {"c": DEV_CHAR, "b": DEV_BLOCK, "a": 0}.get(parts[0] if parts else "")
    if kind is None or len(parts) > 3:
        raise ValueError(f"device rule {text!r}: want 'c|b MAJOR:MINOR'")
    if kind == 0 or len(parts) == 1:
        return (kind, None, None)
    major, sep, minor = parts[1].partition(":")
    if not sep:
        raise ValueError(f"device rule {text!r}: want 'c|b MAJOR:MINOR'")

    def number(s: str) -> int | None:
        if s == "*":
            return None
        if not s.isdigit():
            raise ValueError(f"device rule {text!r}: {s!r} is not a number or *")
        return int(s)
    return (kind, number(major), number(minor))


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(deny: list[Rule]) -> bytes:
    """The instructions (8 bytes each) of a program refusing ``deny``."""
    out = [_insn(_LDX_W, 2, 1, 0), _insn(_AND_K, 2, imm=0xFFFF),
           _insn(_LDX_W, 4, 1, 4), _insn(_LDX_W, 5, 1, 8)]
    for kind, major, minor in deny:
        checks = [(reg, value) for reg, value in ((2, kind or None), (4, major), (5, minor))
                  if value is not None]
        for i, (reg, value) in enumerate(checks):
            # past the remaining checks and the two instructions that deny
            out.append(_insn(_JNE_K, reg, off=len(checks) - i - 1 + 2, imm=value))
        out += [_insn(_MOV_K, 0, imm=0), _insn(_EXIT)]
    out += [_insn(_MOV_K, 0, imm=1), _insn(_EXIT)]
    return b"".join(out)


def _bpf(cmd: int, attr: bytes) -> int:
    nr = SYS_BPF.get(platform.machine())
    if nr is None:
        raise DeviceFilterError(errno.ENOSYS, f"bpf(2) on {platform.machine()} is not known here")
    buf = ctypes.create_string_buffer(attr, 128)        # union bpf_attr, zero-padded
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), buf, ctypes.c_uint(128))
    if r < 0:
        err = ctypes.get_errno()
        raise DeviceFilterError(err, os.strerror(err))
    return r


def load(deny: list[Rule]) -> int:
    """Load the program; its file descriptor (the caller closes it). The
    verifier's log is asked for only when loading fails (its words go into
    the error): a log too small for a long program would fail the load."""
    insns = program(deny)
    code = ctypes.create_string_buffer(insns, len(insns))
    license_ = ctypes.create_string_buffer(b"GPL")

    def attempt(log_level: int, log) -> int:
        # prog_type, insn_cnt, insns, license, log_level, log_size, log_buf,
        # kern_version, prog_flags, prog_name[16]
        return _bpf(BPF_PROG_LOAD, struct.pack(
            "<IIQQIIQII16s", BPF_PROG_TYPE_CGROUP_DEVICE, len(insns) // 8,
            ctypes.addressof(code), ctypes.addressof(license_), log_level,
            len(log) if log is not None else 0, ctypes.addressof(log) if log is not None else 0,
            0, 0, b"lingjun_devices"))
    try:
        return attempt(0, None)
    except DeviceFilterError as first:
        log = ctypes.create_string_buffer(1 << 20)
        try:
            return attempt(1, log)          # it loaded this time: say nothing
        except DeviceFilterError:
            words = log.value.decode(errors="replace").strip().splitlines()[-1:]
        raise DeviceFilterError(first.errno, "loading the device program: "
                                + (words[0] if words else first.strerror)) from None


def attach(cgroup_dir: str | os.PathLike, deny: list[str]) -> None:
    """Refuse the device files ``deny`` ("c 195:2", ...) to every process in
    ``cgroup_dir`` (a cgroup v2 directory) and below it. DeviceFilterError if
    the kernel will not (no CAP_BPF/CAP_SYS_ADMIN, not a v2 cgroup, ...)."""
    rules = [parse_rule(r) for r in deny]
    prog = load(rules)
    try:
        fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        os.close(prog)
        raise
    try:
        # target_fd, attach_bpf_fd, attach_type, attach_flags
        _bpf(BPF_PROG_ATTACH, struct.pack("<IIII", fd, prog, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI))
    except DeviceFilterError as e:
        raise DeviceFilterError(e.errno, f"attaching the device program to {cgroup_dir}: "
                                         f"{e.strerror}") from None
    finally:
        os.close(fd)
        os.close(prog)
