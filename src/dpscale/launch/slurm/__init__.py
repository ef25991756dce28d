"""A cell under SLURM: the job it asks for (``resources``), starting its processes inside the
allocation (``allocation``), one task's rank (``rank``, ``task``), and the cells whose job
SLURM ended without a result (``faults``).

Imports the launch kinds (a task's rank variables, a job's shape) and failures (a failed
job's result) from the top of launch, no other room (tests/unit/test_boundaries.py). Imports
nothing itself: ``python -m dpscale.launch.slurm.task`` runs with any framework environment's
Python.
"""
