"""What dpscale changes in the Snakemake process itself, called from the workflow's rules:
one pending scheduler re-evaluation at a time (``scheduler_fix``), the SLURM executor plugin
while sacct does not answer (``slurm_status``), a SLURM job's Snakemake process ending with
the job's shell (``slurm_job``).

Imports the guard (dying with a parent) from the top of launch, no other room
(tests/unit/test_boundaries.py).
"""
