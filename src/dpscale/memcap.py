"""Run a command under an address-space cap: ``python -m dpscale.memcap MB -- COMMAND...``.

Sets RLIMIT_AS (soft and hard) to MB MiB, then becomes COMMAND; every process it starts
inherits the cap, each process on its own. An allocation past it fails inside the process
(``MemoryError``, ``can't allocate memory``), which the launcher records as ``oom``: the
cell fails, the study goes on. Stdlib only (runs with any Python).
"""

from __future__ import annotations

import os
import resource
import sys


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        sys.exit("usage: python -m dpscale.memcap MB -- COMMAND...")
    limit = int(args[0]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execvp(args[2], args[2:])


if __name__ == "__main__":
    main()
