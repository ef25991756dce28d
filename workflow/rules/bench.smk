# One job per cell. The launcher always leaves a result: ok, oom, failed or skipped with a
# reason, so one broken cell never stops the study and is visible in the tables.


rule bench_cell:
    """One cell's result JSON (ok, oom, failed or skipped), measured by the launcher."""
    input:
        env=cell_env_marker,
        data=cell_dataset,
    output:
        f"{CELLS_DIR}/{CELL_PATTERN}.json",
    log:
        f"{LOGS}/cells/{CELL_PATTERN}.log",
    priority: cell_priority
    resources:
        bench_slot=2,  # the whole machine (profiles/default): nothing runs beside a cell
        # On a SLURM cluster (--profile slurm) each cell is one job shaped like its
        # processes; see src/dpscale/launch/slurm/resources.py. Local runs ignore these.
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


# A job SLURM ended under its launcher (scancel, time or memory limit, a node down, a
# preemption not requeued) leaves no result, and the executor removes what it wrote: each
# such cell of this run gets a failed (or oom) result with SLURM's reason from sacct or
# scontrol (launch/slurm/faults.py), so `dpscale status` counts it and `rerun-failed`
# measures it again. Cells with a result are never touched.
onerror:
    record_slurm_failures(workflow, CELLS, CELLS_DIR, RUN_STARTED)


# After the last cell, with the machine quiet, a cell whose quality was one of measure.again
# (noisy, contaminated) is measured once more into <cell>.again.json; both results are kept
# and every reader of cell results uses the better one (dpscale.analysis.results.again).
checkpoint quality_review:
    """measure_again.json: the cells whose quality asks for a second measurement, from results."""
    input:
        results=cells_reviewed(),
    output:
        review=f"{TABLES}/measure_again.json",
    log:
        f"{LOGS}/quality_review.log",
    # ahead of the last drift probe (the lowest priority), and not beside it: the cells it
    # picks (priorities above the probe's too) run before the probe closes the trace
    priority: len(CELLS) + 1
    localrule: True
    resources:
        bench_slot=2,
    params:
        qualities=config["measure"]["again"],
    script:
        "../scripts/step.py"


use rule bench_cell as measure_again with:
    """A cell measured once more into <cell>.again.json, if the quality review asks."""
    input:
        first=f"{CELLS_DIR}/{CELL_PATTERN}.json",
        env=cell_env_marker,
        data=cell_dataset,
    output:
        f"{CELLS_DIR}/{CELL_PATTERN}.again.json",
    log:
        f"{LOGS}/cells/{CELL_PATTERN}.again.log",


rule cells:
    """Every cell's result, measured again where asked, and no analysis."""
    input:
        cell_results(),
        again_results(),
    localrule: True
