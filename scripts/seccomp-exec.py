#!/usr/bin/env python3
"""Runs a command under an OCI/Kubernetes seccomp profile (the JSON a
`seccompProfile: {type: Localhost}` names), loaded with libseccomp as
container runtimes load it, optionally as another user; tests/deploy.rs uses
it to run the agent as its DaemonSet would, without a cluster.

    python3 scripts/seccomp-exec.py [--user UID:GID] [--deny NAME,...] PROFILE -- COMMAND...

--deny adds names to deny (EPERM) on top of the profile: `--deny
io_uring_setup,io_uring_enter,io_uring_register` is what the runtimes'
default profiles do to io_uring. Handles the subset of the format a profile
of headroom's uses: defaultAction, architectures, and syscalls entries of
names, action (SCMP_ACT_ALLOW or SCMP_ACT_ERRNO) and errnoRet; anything
else is refused, so a profile this cannot apply is not silently half applied.
"""
import ctypes
import json
import os
import sys

ACT_ALLOW = 0x7FFF0000


def act_errno(errno):
    return 0x00050000 | (errno & 0xFFFF)


def action(name, errno):
    if name == "SCMP_ACT_ALLOW":
        return ACT_ALLOW
    if name == "SCMP_ACT_ERRNO":
        return act_errno(errno)
    sys.exit(f"seccomp-exec: action {name} is not handled here")


def main():
    args = sys.argv[1:]
    user, extra_deny = None, []
    while args and args[0].startswith("--") and args[0] != "--":
        flag, value = args[0], args[1]
        if flag == "--user":
            user = tuple(int(x) for x in value.split(":"))
        elif flag == "--deny":
            extra_deny = value.split(",")
        else:
            sys.exit(f"seccomp-exec: unknown flag {flag}")
        args = args[2:]
    profile_path, sep, command = args[0], args[1], args[2:]
    if sep != "--" or not command:
        sys.exit(__doc__)
    profile = json.load(open(profile_path))
    known = {"defaultAction", "defaultErrnoRet", "architectures", "syscalls"}
    if set(profile) - known:
        sys.exit(f"seccomp-exec: fields not handled: {sorted(set(profile) - known)}")

    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]

    default = action(profile["defaultAction"], profile.get("defaultErrnoRet", 1))
    ctx = lib.seccomp_init(default)
    if not ctx:
        sys.exit("seccomp-exec: seccomp_init failed")
    for arch in profile.get("architectures", []):
        token = lib.seccomp_arch_resolve_name(arch.removeprefix("SCMP_ARCH_").lower().encode())
        if token:
            lib.seccomp_arch_add(ctx, token)  # the native one is there already (EEXIST)
    rules = list(profile.get("syscalls", []))
    if extra_deny:
        rules.append({"names": extra_deny, "action": "SCMP_ACT_ERRNO", "errnoRet": 1})
    for rule in rules:
        if set(rule) - {"names", "action", "errnoRet"}:
            sys.exit(f"seccomp-exec: rule fields not handled: {sorted(set(rule) - {'names', 'action', 'errnoRet'})}")
        act = action(rule["action"], rule.get("errnoRet", 1))
        for name in rule["names"]:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr == -1:  # __NR_SCMP_ERROR: no such call anywhere; runc skips it too
                continue
            rc = lib.seccomp_rule_add(ctx, act, nr, 0)
            if rc != 0:
                sys.exit(f"seccomp-exec: rule for {name}: error {rc}")
    if user:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    if lib.seccomp_load(ctx) != 0:
        sys.exit("seccomp-exec: seccomp_load failed")
    os.execvp(command[0], command)


main()
