# Helpers of workflow/rules/findings.smk (the answer first).
import json
import re

TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"


def training_tables(with_runs=False):
    """Accuracy tables the findings (and, with the runs, the post comparison) read, when the
    study trains."""
    if "train" not in config["modes"]:
        return {}
    names = ["accuracy_delta", "time_to_accuracy"]
    names += ["training_runs", "accuracy"] if with_runs else []
    return {name: f"{TABLES}/{name}.csv" for name in names}


def training_args(wildcards, input):
    names = {
        "accuracy_delta": "--accuracy-delta",
        "time_to_accuracy": "--time-to-accuracy",
    }
    return " ".join(
        f"{flag} {input[name]}" for name, flag in names.items() if name in input.keys()
    )


def post_table_args(wildcards, input):
    return " ".join(f"--table {name}={path}" for name, path in input.items())


def rst_text(line):
    """Plain text for reStructuredText: markup characters escaped."""
    return re.sub(r"([\\*`_|])", r"\\\1", line)


def top_findings_for_report():
    """The top findings, for the landing text of `snakemake --report` (report/workflow.rst
    reads config["report_top_findings"]); empty until the findings exist."""
    path = Path(f"{TABLES}/findings_top.json")
    if not path.is_file():
        return []
    return [rst_text(line) for line in json.loads(path.read_text(encoding="utf-8"))]


config["report_top_findings"] = top_findings_for_report()


def findings_outputs():
    tables = ["findings.csv", "findings_top.json", "findings.html"]
    tables += ["post_vs_run.csv", "post_vs_run.html"]
    figures = ["throughput_interactive.html", "speedup_interactive.html", "mfu.png"]
    return [f"{TABLES}/{name}" for name in tables] + [
        f"{FIGURES}/{name}" for name in figures
    ]
