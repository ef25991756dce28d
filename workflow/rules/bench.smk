# One job per cell. The launcher always leaves a result: ok, oom, failed or skipped with a
# reason, so one broken cell never stops the study and is visible in the tables.


rule bench_cell:
    input:
        env=cell_env_marker,
        data=cell_dataset,
    output:
        f"{CELLS_DIR}/{CELL_PATTERN}.json",
    log:
        f"{LOGS}/cells/{CELL_PATTERN}.log",
    priority: cell_priority
    resources:
        bench_slot=1,
        # On a SLURM cluster (--profile slurm) each cell is one job shaped like its
        # processes; see src/dpscale/launch/cluster.py. Local runs ignore these.
        nodes=slurm_resource("nodes"),
        tasks=slurm_resource("tasks"),
        tasks_per_node=slurm_resource("tasks_per_node"),
        mpi=slurm_resource("mpi"),
        cpus_per_task=slurm_resource("cpus_per_task"),
        mem_mb=slurm_resource("mem_mb"),
        runtime=slurm_resource("runtime"),
        gres=slurm_resource("gres"),
        tasks_per_gpu=slurm_resource("tasks_per_gpu"),
    params:
        cell=lambda wc: cell_for(wc).to_json(),
        interpreter=cell_interpreter_args,
    shell:
        "$DPSCALE_PYTHON -m dpscale.launch --cell {params.cell:q} {params.interpreter}"
        " --out {output} --log {log} 2>> {log}"


rule cells:
    input:
        cell_results(),
    localrule: True
