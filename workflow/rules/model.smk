# The communication model: fitted, validated on held-out configurations, used for predictions
# (report category "5. Network model"). Helpers: workflow/rules/model_common.smk.


rule comm_model:
    input:
        windows=f"{MODEL_TABLES}/windows.csv",
        cells=f"{MODEL_TABLES}/cells.csv",
        comm_fits=comm_fits_input,
    output:
        parameters=f"{MODEL_TABLES}/comm_model.csv",
        validation=f"{MODEL_TABLES}/model_validation.csv",
        summary=f"{MODEL_TABLES}/model_validation_summary.csv",
        predictions=f"{MODEL_TABLES}/predictions.csv",
        top=f"{MODEL_TABLES}/model_validation_top.json",
        validation_html=report(
            f"{MODEL_TABLES}/model_validation.html",
            caption="../../report/model_validation.rst",
            category="5. Network model",
            labels={"table": "held-out prediction errors"},
        ),
        parameters_html=report(
            f"{MODEL_TABLES}/comm_model.html",
            caption="../../report/comm_model.rst",
            category="5. Network model",
            labels={"table": "model parameters"},
        ),
        predictions_html=report(
            f"{MODEL_TABLES}/predictions.html",
            caption="../../report/predictions.rst",
            category="5. Network model",
            labels={"table": "predictions"},
        ),
        validation_figure=report(
            f"{MODEL_FIGURES}/model_validation.png",
            caption="../../report/model_validation_figure.rst",
            category="5. Network model",
            labels={"figure": "predicted vs measured"},
        ),
        throughput_figure=report(
            f"{MODEL_FIGURES}/model_throughput.png",
            caption="../../report/model_throughput.rst",
            category="5. Network model",
            labels={"figure": "throughput vs batch per network, model curves"},
        ),
    log:
        f"{RESULTS}/logs/comm_model.log",
    localrule: True
    params:
        comm_fits=comm_fits_arg,
        study=json.dumps(
            {
                key: config[key]
                for key in ("networks", "predict", "devices_per_node", "batch_sizes")
            }
        ),
    shell:
        "$DPSCALE_PYTHON -m dpscale.cli comm-model --windows {input.windows} --cells {input.cells}"
        " {params.comm_fits} --study-config {params.study:q}"
        " --parameters {output.parameters} --validation {output.validation}"
        " --summary {output.summary} --predictions {output.predictions} --top {output.top}"
        " --validation-html {output.validation_html}"
        " --parameters-html {output.parameters_html}"
        " --predictions-html {output.predictions_html}"
        " --validation-figure {output.validation_figure}"
        " --throughput-figure {output.throughput_figure} > {log} 2>&1"
