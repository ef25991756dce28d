# Figures and HTML tables for `snakemake --report`, each with a caption in report/.


rule figures_and_tables:
    """The report's figures (throughput, speedup, residuals, per strategy, image folder,
    start-up, model FLOPs utilisation) and HTML tables (fits, scaling, break-even, cells,
    ...) from the tidy tables: one job, its steps in order (dpscale.steps.STEPS)."""
    input:
        cells=f"{TABLES}/cells.csv",
        windows=f"{TABLES}/windows.csv",
        fits=f"{TABLES}/fits.csv",
        scaling=f"{TABLES}/scaling.csv",
        break_even=f"{TABLES}/break_even.csv",
        repeatability=f"{TABLES}/repeatability.csv",
        timeline=f"{TABLES}/bucket_timeline.csv",
        horovod_timeline=rules.aggregate.output.horovod_timeline,
        input_pipeline=rules.aggregate.output.input_pipeline,
        replay=rules.collectives.output.replay,
    output:
        throughput=report(
            f"{FIGURES}/throughput.png",
            caption="../../report/throughput.rst",
            category="1. Throughput",
            subcategory="figures",
            labels={"name": "throughput vs batch"},
        ),
        speedup=report(
            f"{FIGURES}/speedup.png",
            caption="../../report/speedup.rst",
            category="2. Scaling",
            subcategory="figures",
            labels={"name": "speedup vs devices"},
        ),
        residuals=report(
            f"{FIGURES}/residuals.png",
            caption="../../report/residuals.rst",
            category="1. Throughput",
            subcategory="figures",
            labels={"name": "fit residuals"},
        ),
        frameworks=report(
            f"{FIGURES}/frameworks.png",
            caption="../../report/frameworks.rst",
            category="7. Frameworks",
            subcategory="figures",
            labels={"name": "img/s per strategy"},
        ),
        # listed only in a study whose folder cells ran (its table has a row)
        input_pipeline_figure=page(
            f"{FIGURES}/input_pipeline.png",
            f"{TABLES}/input_pipeline.csv",
            caption="../../report/input_pipeline_figure.rst",
            category="1. Throughput",
            subcategory="figures",
            labels={"name": "your image folder against synthetic data"},
        ),
        input_pipeline_html=page(
            f"{TABLES}/input_pipeline.html",
            f"{TABLES}/input_pipeline.csv",
            caption="../../report/input_pipeline.rst",
            category="1. Throughput",
            subcategory="tables",
            labels={"name": "your image folder against synthetic data"},
        ),
        timeline_html=report(
            f"{TABLES}/bucket_timeline.html",
            caption="../../report/bucket_timeline.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "gradient bucket timelines"},
        ),
        horovod_timeline_html=page(
            f"{TABLES}/horovod_timeline.html",
            f"{TABLES}/horovod_timeline.csv",
            caption="../../report/horovod_timeline.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "all-reduce hidden behind backward (Horovod)"},
        ),
        fits_html=report(
            f"{TABLES}/fits.html",
            caption="../../report/fits.rst",
            category="1. Throughput",
            subcategory="tables",
            labels={"name": "throughput-law fits"},
        ),
        scaling_html=report(
            f"{TABLES}/scaling.html",
            caption="../../report/scaling.rst",
            category="2. Scaling",
            subcategory="tables",
            labels={"name": "speedup and efficiency"},
        ),
        break_even_html=report(
            f"{TABLES}/break_even.html",
            caption="../../report/break_even.rst",
            category="2. Scaling",
            subcategory="tables",
            labels={"name": "break-even batch"},
        ),
        cells_html=report(
            f"{TABLES}/cells.html",
            caption="../../report/cells.rst",
            category="3. Cells",
            subcategory="tables",
            labels={"name": "every cell"},
        ),
        repeatability_html=page(
            f"{TABLES}/repeatability.html",
            f"{TABLES}/repeatability.csv",
            caption="../../report/repeatability.rst",
            category="3. Cells",
            subcategory="tables",
            labels={"name": "repeatability"},
        ),
        systems_html=report(
            f"{TABLES}/systems.html",
            caption="../../report/systems.rst",
            category="3. Cells",
            subcategory="tables",
            labels={"name": "systems"},
        ),
        startup_table=f"{TABLES}/startup.csv",
        startup_figure=report(
            f"{FIGURES}/startup.png",
            caption="../../report/startup.rst",
            category="2. Scaling",
            subcategory="figures",
            labels={"name": "start-up per layout"},
        ),
        mfu_figure=report(
            f"{FIGURES}/mfu.png",
            caption="../../report/mfu.rst",
            category="1. Throughput",
            subcategory="figures",
            labels={"name": "model FLOPs utilisation"},
        ),
    log:
        f"{LOGS}/figures_and_tables.log",
    localrule: True
    script:
        "../scripts/step.py"


rule data_tables:
    """The report's data category: every tidy CSV of the study in one folder."""
    input:
        tables=tidy_tables,
    output:
        folder=report(
            directory(f"{RESULTS}/data"),
            patterns=["{name}.csv"],
            caption="../../report/data.rst",
            category="8. Data",
            subcategory="tables",
            labels={"name": "{name}.csv"},
        ),
    log:
        f"{LOGS}/data_tables.log",
    localrule: True
    script:
        "../scripts/step.py"
