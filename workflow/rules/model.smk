# The communication model (src/dpscale/core/commmodel.py): the step time of each layout
# explained by the 1-rank throughput law, a ring all-reduce over the layout's link and an
# overlap form; validated on held-out configurations and used for predictions (config
# `predict`). Uses the collective benchmark's alpha/beta (comm_fits.csv) when a rule of the
# workflow makes it, the networks' configured rates otherwise.
import json

MODEL_TABLES = f"{RESULTS}/tables"
MODEL_FIGURES = f"{RESULTS}/figures"
COMM_FITS = f"{MODEL_TABLES}/comm_fits.csv"


def comm_fits_input(wildcards):
    """comm_fits.csv when some rule of the workflow writes it, else nothing."""
    made = any(
        COMM_FITS in [str(path) for path in rule.output] for rule in workflow.rules
    )
    return [COMM_FITS] if made else []


def comm_fits_arg(wildcards, input):
    return f"--comm-fits {input.comm_fits}" if input.comm_fits else ""


def model_validation_lines():
    """The held-out errors in words, for the report's captions; empty until computed."""
    path = Path(f"{MODEL_TABLES}/model_validation_top.json")
    if not path.is_file():
        return []
    return [rst_text(line) for line in json.loads(path.read_text(encoding="utf-8"))]


config["model_validation_lines"] = model_validation_lines()


def model_outputs():
    tables = ["comm_model.csv", "model_validation.csv", "model_validation_summary.csv"]
    tables += ["predictions.csv", "model_validation_top.json", "model_validation.html"]
    tables += ["comm_model.html", "predictions.html"]
    figures = ["model_validation.png", "model_throughput.png"]
    return [f"{MODEL_TABLES}/{name}" for name in tables] + [
        f"{MODEL_FIGURES}/{name}" for name in figures
    ]


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
            category="4. Network model",
            labels={"table": "held-out prediction errors"},
        ),
        parameters_html=report(
            f"{MODEL_TABLES}/comm_model.html",
            caption="../../report/comm_model.rst",
            category="4. Network model",
            labels={"table": "model parameters"},
        ),
        predictions_html=report(
            f"{MODEL_TABLES}/predictions.html",
            caption="../../report/predictions.rst",
            category="4. Network model",
            labels={"table": "predictions"},
        ),
        validation_figure=report(
            f"{MODEL_FIGURES}/model_validation.png",
            caption="../../report/model_validation_figure.rst",
            category="4. Network model",
            labels={"figure": "predicted vs measured"},
        ),
        throughput_figure=report(
            f"{MODEL_FIGURES}/model_throughput.png",
            caption="../../report/model_throughput.rst",
            category="4. Network model",
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
