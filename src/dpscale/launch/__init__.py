"""On the launching host: one cell's launch and everything around it.

The cell's story at the top (``launcher`` tells it: ``checks``, ``supervise``, ``failures``,
launch ``kinds``, the ``guard``, ``contention`` sampling, free ``ports``, ``rank_exits``;
``without_snakemake`` runs a study's cells one by one), the rest in rooms by what they touch:
``setup`` (framework environments, site interpreters, datasets), ``emulation`` (emulated
nodes), ``slurm`` (a cell's SLURM job, allocation and tasks), ``starters`` (Horovod's
rendezvous, horovodrun, MXNet's parameter servers) and ``snakemake_hooks`` (patches of the
Snakemake process). ``python -m dpscale.launch`` measures one cell (launcher.py). Imports
plan, runner, the registry and launch; no pandas, no plotting, no framework but where a
launcher needs its own (tests/unit/test_boundaries.py, which also holds each room's imports).
"""
