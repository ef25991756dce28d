# One job per cell. The launcher always leaves a result: ok, oom, failed or skipped with a
# reason, so one broken cell never stops the study and is visible in the tables.


rule bench_cell:
    input:
        env=cell_env_marker,
        data=cell_dataset,
    output:
        f"{RESULTS}/cells/{CELL_PATTERN}.json",
    log:
        f"{RESULTS}/logs/cells/{CELL_PATTERN}.log",
    resources:
        bench_slot=1,
    params:
        cell=lambda wc: cell_for(wc).to_json(),
        env_prefix=lambda wc, input: (
            str(Path(input.env).parent) if input.env else "none"
        ),
    run:
        shell(
            "{PYTHON} -m dpscale.launch --cell {params.cell:q} --env {params.env_prefix}"
            " --out {output} --log {log} 2>> {log}"
        )


rule cells:
    input:
        cell_results(),
    localrule: True
