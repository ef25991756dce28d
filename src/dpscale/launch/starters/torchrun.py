"""``torchrun``, leaving without Python's finalization once every rank has ended well.

    python -m dpscale.launch.starters.torchrun --standalone --nproc_per_node=N -m MODULE...

torchrun's agent imports torch; its interpreter's finalization then takes 0.7-0.9 s of CPU
after the last rank has exited, on every torch-ddp cell on 2 cores. Once
``torch.distributed.run.main`` returns (every rank exited 0), nothing is left to do, so
this flushes and leaves with ``os._exit(0)`` (docs/decisions/runner-exit.md). A failure
raises as in torchrun (its error table, exit 1). Its empty log folder goes to the cell's
scratch folder (dpscale.runner.temporary). Everything else is torchrun's.
Runs in the framework's environment (it imports torch).
"""

from __future__ import annotations

import os
import sys

from torch.distributed.run import main

from dpscale.runner.temporary import keep_temporary_files_in_scratch

if __name__ == "__main__":
    keep_temporary_files_in_scratch()  # its log folder (torchelastic_*) goes with the cell's
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
