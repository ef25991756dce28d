"""``horovodrun``, without its Gloo build check before every launch (the ranks check).

    python -m dpscale.launch.starters.horovodrun -np N -H localhost:N --gloo COMMAND...

Before it starts the ranks, ``horovodrun --gloo`` asks whether Horovod was built with Gloo
by importing every Horovod extension, so TensorFlow, in a forked child: 3 s of CPU per cell
on a 2-core machine, a fifth of a small horovod-tf cell's wall time. The ranks answer the
same question when it matters: ``hvd.init()`` under ``HOROVOD_CONTROLLER=gloo``, then the
adapter's own check (dpscale.strategies.horovod_tf). Everything else is horovodrun's.
Runs in the framework's environment (it imports horovod.runner).
"""

from __future__ import annotations

import horovod.runner.launch as horovodrun


def gloo_checked_by_the_ranks(verbose: bool = False) -> bool:
    return True


if __name__ == "__main__":
    horovodrun.gloo_built = gloo_checked_by_the_ranks
    horovodrun.run_commandline()
