"""`python reaper.py PARENT_PID LOG COMMAND...`: run COMMAND as the leader of its own
process group and reap it and every process it leaves behind, as a container's init does.

Why: a SIGKILLed driver's JVM and Python workers are orphaned at once. Here they are
reparented to PID 1, which on this machine (and in some CI sandboxes) never reaps them, so
they would stay in `ps` as zombies. As a child subreaper this process adopts them instead;
it exits only when no descendant is left (its exit is the proof that the whole tree is
gone). It prints COMMAND's pid (= its process group id) on its first line and `exit N`
(COMMAND's exit code, `-9` after a SIGKILL) on its last. It dies with PARENT_PID (the test), and SIGKILLs the
group when it does, so a test that is itself killed leaves no driver behind. Standard
library only: it runs before anything of the project is imported.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    parent, log_path, command = int(argv[0]), argv[1], argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the test died before the prctl took effect
        return 1
    with open(log_path, "ab") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)  # fmt: skip

    def end(*_: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, end)
    print(child.pid, flush=True)
    code = 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            with contextlib.suppress(OSError):  # the test may be gone (then nobody asks)
                print(f"exit {code}", flush=True)
            return 0
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            child.returncode = code  # reaped here: Popen must not wait for it again


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
