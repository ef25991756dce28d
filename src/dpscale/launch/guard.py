"""Start a cell's launcher process so that it dies with dpscale.launch, optionally under a
memory cap: ``python -m dpscale.launch.guard [--memory-mb MB] -- COMMAND...``.

Sets the parent-death signal to SIGKILL (Linux ``PR_SET_PDEATHSIG``: if dpscale.launch is
killed, even by SIGKILL, this process is killed too; the ranks below it then notice that
their parent is gone, see runner.faults.exit_with_parent), and with ``--memory-mb`` caps the
address space (RLIMIT_AS, soft and hard) at MB MiB, which every process it starts inherits,
each on its own. An allocation past the cap fails inside the process (``MemoryError``,
``can't allocate memory``), which the launcher records as ``oom``: the cell fails, the study
goes on. Then it becomes COMMAND. Stdlib only (runs with any Python).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory-mb", type=int, default=None, help="RLIMIT_AS in MiB")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("need a command after --")
    die_with_parent()
    if args.memory_mb is not None:
        limit = args.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
