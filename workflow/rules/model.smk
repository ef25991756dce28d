# The communication model: fitted, validated on held-out configurations, used for predictions
# (report category "5. Network model"). It reads the collective benchmark's alpha and beta
# (comm_fits.csv, empty without collectives cells: then the networks' configured rates).
# The same job checks the exported-log path: a step of under a second, which a job of its own
# made cost a Python start per study. The published cases are a job of their own: they read
# no cell, so rerunning a cell does not redo them (2 s of every rerun, issue 74). The
# published cases file and the profile they borrow are the config's published_cases, else
# the workflow's own (docs/decisions/published-cases-inputs.md).
from dpscale.workflow_door import published_files


rule comm_model:
    """The communication model fitted on windows and all-reduce fits, validated, its predictions;
    the study's multi-node cells predicted through its own exported collectives logs."""
    input:
        windows=f"{TABLES}/windows.csv",
        cells=f"{TABLES}/cells.csv",
        comm_fits=rules.collectives.output.fits,
        timeline=f"{TABLES}/bucket_timeline.csv",
        replay=rules.collectives.output.replay,
        collectives=rules.collectives.output.table,
    output:
        parameters=f"{TABLES}/comm_model.csv",
        validation=f"{TABLES}/model_validation.csv",
        summary=f"{TABLES}/model_validation_summary.csv",
        predictions=f"{TABLES}/predictions.csv",
        remedies=f"{TABLES}/remedy_model.csv",
        remedy_validation=f"{TABLES}/remedy_validation.csv",
        remedy_predictions=f"{TABLES}/remedy_predictions.csv",
        remedies_html=page(
            f"{TABLES}/remedy_model.html",
            f"{TABLES}/remedy_model.csv",
            caption="../../report/remedy_model.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "remedies in the model"},
        ),
        top=f"{TABLES}/model_validation_top.json",
        validation_html=report(
            f"{TABLES}/model_validation.html",
            caption="../../report/model_validation.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "held-out prediction errors"},
        ),
        parameters_html=report(
            f"{TABLES}/comm_model.html",
            caption="../../report/comm_model.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "model parameters"},
        ),
        predictions_html=report(
            f"{TABLES}/predictions.html",
            caption="../../report/predictions.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "predictions"},
        ),
        validation_figure=report(
            f"{FIGURES}/model_validation.png",
            caption="../../report/model_validation_figure.rst",
            category="5. Network model",
            subcategory="figures",
            labels={"name": "predicted vs measured"},
        ),
        throughput_figure=report(
            f"{FIGURES}/model_throughput.png",
            caption="../../report/model_throughput.rst",
            category="5. Network model",
            subcategory="figures",
            labels={"name": "throughput vs batch per network, model curves"},
        ),
        # The import-to-prediction path of `dpscale predict` checked on
        # this study's own outcomes, in this job (a job of its own costs every study a Python
        # start). Its collectives cells exported as nccl-tests logs (`dpscale export-nccl`),
        # read back as a cluster's log, and each multi-node synthetic cell predicted from the
        # one-process cell, beside the native model's held-out medians. A study without
        # collectives at two or more ranks, or without multi-node cells, gets a table with
        # one row saying why.
        exported_table=f"{TABLES}/exported_log_check.csv",
        exported_summary=f"{TABLES}/exported_log_check_summary.csv",
        exported_summary_html=report(
            f"{TABLES}/exported_log_check_summary.html",
            caption="../../report/exported_log_check.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "exported nccl-tests logs, end to end"},
        ),
        exported_table_html=page(
            f"{TABLES}/exported_log_check.html",
            f"{TABLES}/exported_log_check.csv",
            caption="../../report/exported_log_check_cells.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "exported nccl-tests logs, per cell"},
        ),
    log:
        f"{LOGS}/comm_model.log",
    localrule: True
    params:
        study=json.dumps(model_inputs(config, STRATEGIES)),  # links parsed once, in plan/
        name=config["study"],
    script:
        "../scripts/step.py"


rule published_cases:
    """The published multi-GPU results predicted (extrapolated) from their cases and a
    borrowed one-device profile: no cell is measured for them, the table is the same in
    every study with the same files."""
    input:
        **published_files(config),  # the published cases and the profile they borrow
    output:
        table=f"{TABLES}/published_cases.csv",
        top=f"{TABLES}/published_cases_top.json",
        html=report(
            f"{TABLES}/published_cases.html",
            caption="../../report/published_cases.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "published multi-GPU results, predicted (extrapolated)"},
        ),
    log:
        f"{LOGS}/published_cases.log",
    localrule: True
    resources:
        bench_slot=1,  # it reads no cell, so it can start while cells measure: never beside one
    script:
        "../scripts/step.py"
