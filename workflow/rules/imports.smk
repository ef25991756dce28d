# What users measured elsewhere (config imports): nccl-tests' all_reduce_perf, Horovod's
# synthetic benchmarks and tf_cnn_benchmarks logs -> tidy tables whose rows say their source.
# The all-reduce rows join the collectives table (collectives.smk), fitted on their own; the
# throughput runs get their own table. Every log was read once when the workflow started
# (common.smk): a bad one stops it before any job.


rule imports:
    """Tidy tables from logs measured elsewhere (config imports), rows naming a source."""
    input:
        logs=[entry["path"] for entry in config["imports"]],
    output:
        collectives=f"{TABLES}/imported_collectives.csv",
        throughput=f"{TABLES}/imported_throughput.csv",
        throughput_html=report(
            f"{TABLES}/imported_throughput.html",
            caption="../../report/imported_throughput.rst",
            category="7. Frameworks",
            subcategory="tables",
            labels={"name": "imported throughput"},
        ),
    log:
        f"{LOGS}/imports.log",
    localrule: True
    resources:
        bench_slot=1,  # it can start while cells measure: never beside one (a cell takes 2)
    params:
        imports=json.dumps(config["imports"]),
        study=config["study"],
    script:
        "../scripts/step.py"
