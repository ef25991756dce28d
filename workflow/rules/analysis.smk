# Every throughput and training cell -> tidy tables (CSV, loadable with pandas) -> fits, scaling and break-even.


rule aggregate:
    """Tidy tables (cells, windows, fits, scaling, break-even) from every cell's result."""
    input:
        # every cell, collectives too (their own rule reads them), and every cell measured
        # again: nothing downstream of the tables runs beside a measuring cell
        cell_results(),
        again=again_results(),
    output:
        cells=f"{TABLES}/cells.csv",
        windows=f"{TABLES}/windows.csv",
        fits=f"{TABLES}/fits.csv",
        scaling=f"{TABLES}/scaling.csv",
        break_even=f"{TABLES}/break_even.csv",
        repeatability=f"{TABLES}/repeatability.csv",
        timeline=f"{TABLES}/bucket_timeline.csv",
        # the cells that kept Horovod's timeline (config horovod_timeline); else no rows
        horovod_timeline=f"{TABLES}/horovod_timeline.csv",
        # mode folder: each folder cell beside its synthetic layout and its loader alone
        input_pipeline=f"{TABLES}/input_pipeline.csv",
    log:
        f"{LOGS}/aggregate.log",
    localrule: True
    params:
        results=cell_results(exclude=("collectives",)),
    script:
        "../scripts/step.py"


rule accuracy:
    """Accuracy and time-to-accuracy tables and figures from the training cells."""
    input:
        results=cell_results("train"),
        again=again_results("train"),
    output:
        runs=f"{TABLES}/training_runs.csv",
        epochs=f"{TABLES}/training_epochs.csv",
        summary=f"{TABLES}/accuracy.csv",
        deltas=f"{TABLES}/accuracy_delta.csv",
        tta=f"{TABLES}/time_to_accuracy.csv",
        deltas_html=report(
            f"{TABLES}/accuracy_delta.html",
            caption="../../report/accuracy_delta.rst",
            category="6. Accuracy",
            subcategory="tables",
            labels={"name": "accuracy delta"},
        ),
        tta_html=report(
            f"{TABLES}/time_to_accuracy.html",
            caption="../../report/time_to_accuracy.rst",
            category="6. Accuracy",
            subcategory="tables",
            labels={"name": "time to accuracy"},
        ),
        curves=report(
            f"{FIGURES}/accuracy.png",
            caption="../../report/accuracy.rst",
            category="6. Accuracy",
            subcategory="figures",
            labels={"name": "accuracy curves"},
        ),
        epoch_time=report(
            f"{FIGURES}/epoch_time.png",
            caption="../../report/epoch_time.rst",
            category="6. Accuracy",
            subcategory="figures",
            labels={"name": "epoch time vs devices"},
        ),
    log:
        f"{LOGS}/accuracy.log",
    localrule: True
    resources:
        bench_slot=1,  # it can start while cells measure: never beside one (a cell takes 2)
    script:
        "../scripts/step.py"


# The machine's drift through the run: the reference cell measured at intervals (config drift;
# only in studies with drift.probes).
rule drift:
    """The machine's drift through the run, from the reference cell's probes in cells.csv."""
    input:
        cells=f"{TABLES}/cells.csv",
    output:
        table=f"{TABLES}/drift.csv",
        figure=report(
            f"{FIGURES}/drift.png",
            caption="../../report/drift.rst",
            category="3. Cells",
            subcategory="figures",
            labels={"name": "machine drift"},
        ),
    log:
        f"{LOGS}/drift.log",
    localrule: True
    script:
        "../scripts/step.py"


# Where each layout's lost efficiency goes, from its control cells (config controls; only in
# studies that run them).
rule loss_breakdown:
    """Each layout's loss split into contention, waiting, exposed exchange and input pipeline,
    from its control cells in cells.csv: table, page and waterfalls."""
    input:
        cells=f"{TABLES}/cells.csv",
    output:
        table=f"{TABLES}/loss_breakdown.csv",
        html=report(
            f"{TABLES}/loss_breakdown.html",
            caption="../../report/loss_breakdown.rst",
            category="2. Scaling",
            subcategory="tables",
            labels={"name": "where the loss goes"},
        ),
        figure=report(
            f"{FIGURES}/loss_breakdown.png",
            caption="../../report/loss_breakdown_figure.rst",
            category="2. Scaling",
            subcategory="figures",
            labels={"name": "where the loss goes"},
        ),
    log:
        f"{LOGS}/loss_breakdown.log",
    localrule: True
    params:
        title=f"Where the lost efficiency goes: study {config['study']}",
    script:
        "../scripts/step.py"
