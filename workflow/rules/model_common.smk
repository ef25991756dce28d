# Helpers of workflow/rules/model.smk. The communication model (src/dpscale/core/
# commmodel.py) explains each layout's step time by the 1-rank throughput law, a ring
# all-reduce over the layout's link and an overlap form. It uses the collective benchmark's
# alpha/beta (comm_fits.csv) when a rule of the workflow makes it, the networks' configured
# rates otherwise.
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
