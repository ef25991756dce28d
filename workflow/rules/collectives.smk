# Collectives cells (mode collectives) and imported all_reduce_perf logs (imports.smk) ->
# per-size table, alpha-beta fits per source, bus bandwidth. A study with neither gets empty
# tables (with their headers) and a figure that says so, which the report does not list
# (page(), common.smk: only pages whose tables have a row).


rule collectives:
    """All-reduce table, alpha-beta fits and bus bandwidth from collectives results."""
    input:
        results=cell_results("collectives"),
        again=again_results("collectives"),
        imported=imported_collectives_table(),
    output:
        table=f"{TABLES}/collectives.csv",
        fits=f"{TABLES}/comm_fits.csv",
        fits_html=page(
            f"{TABLES}/comm_fits.html",
            f"{TABLES}/comm_fits.csv",
            caption="../../report/comm_fits.rst",
            category="4. Network",
            subcategory="tables",
            labels={"name": "all-reduce alpha and beta"},
        ),
        ranks=f"{TABLES}/collective_ranks.csv",
        ranks_html=page(
            f"{TABLES}/collective_ranks.html",
            f"{TABLES}/collective_ranks.csv",
            caption="../../report/collective_ranks.rst",
            category="4. Network",
            subcategory="tables",
            labels={"name": "all-reduce at more ranks, predicted"},
        ),
        replay=f"{TABLES}/gradient_replay.csv",
        replay_html=page(
            f"{TABLES}/gradient_replay.html",
            f"{TABLES}/gradient_replay.csv",
            caption="../../report/gradient_replay.rst",
            category="4. Network",
            subcategory="tables",
            labels={"name": "one step's gradient traffic"},
        ),
        figure=page(
            f"{FIGURES}/collectives_busbw.png",
            f"{TABLES}/collectives.csv",
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
