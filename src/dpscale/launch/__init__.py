"""On the launching host: one cell's launch and everything around it.

Framework environments, datasets, launch kinds, the guard, contention sampling, emulated
nodes, SLURM allocations and tasks, Horovod's rendezvous and MXNet's parameter servers.
``python -m dpscale.launch`` measures one cell (launcher.py). Imports plan, runner, the
registry and launch; no pandas, no plotting, no framework but where a launcher needs its own
(tests/unit/test_boundaries.py).
"""
