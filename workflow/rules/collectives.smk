# Collectives cells (mode collectives) and imported all_reduce_perf logs (imports.smk) ->
# per-size table, alpha-beta fits per source, bus bandwidth. A study with neither gets empty
# tables (with their headers) and a figure that says so; the report asks for them only when
# the study has mode collectives or a nccl-tests import.


rule collectives:
    """All-reduce table, alpha-beta fits and bus bandwidth from collectives results."""
    input:
        results=cell_results("collectives"),
        again=again_results("collectives"),
        imported=imported_collectives_table(),
    output:
        table=f"{TABLES}/collectives.csv",
        fits=f"{TABLES}/comm_fits.csv",
        fits_html=report(
            f"{TABLES}/comm_fits.html",
            caption="../../report/comm_fits.rst",
            category="4. Network",
            subcategory="tables",
            labels={"name": "all-reduce alpha and beta"},
        ),
        ranks=f"{TABLES}/collective_ranks.csv",
        ranks_html=report(
            f"{TABLES}/collective_ranks.html",
            caption="../../report/collective_ranks.rst",
            category="4. Network",
            subcategory="tables",
            labels={"name": "all-reduce at more ranks, predicted"},
        ),
        replay=f"{TABLES}/gradient_replay.csv",
        replay_html=report(
            f"{TABLES}/gradient_replay.html",
            caption="../../report/gradient_replay.rst",
            category="4. Network",
            subcategory="tables",
            labels={"name": "one step's gradient traffic"},
        ),
        figure=report(
            f"{FIGURES}/collectives_busbw.png",
            caption="../../report/collectives_busbw.rst",
            category="4. Network",
            subcategory="figures",
            labels={"name": "all-reduce bus bandwidth"},
        ),
    log:
        f"{LOGS}/collectives.log",
    localrule: True
    resources:
        bench_slot=1,  # it can start while cells measure: never beside one (a cell takes 2)
    script:
        "../scripts/step.py"
