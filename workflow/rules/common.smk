# Config checks, the matrix, every helper of the rules, the folders outputs go to, and the
# list of final outputs (built from the rules' own outputs: each file name is written once,
# in its rule).
import base64
import json
import shlex
import sys
from pathlib import Path

# the workflow's one door into dpscale (docs/architecture.md): every .smk file shares these
from dpscale.workflow_door import (
    CELL_PATTERN,  # the cell id as wildcards (plan.cell)
    MODEL_WILDCARD,  # the model keys {model} matches (plan.cell)
    READY_MARKER,
    STRATEGIES,
    STUDY_CELLS_ENV,
    ConfigError,
    LockError,
    cell_resource,
    check_study,
    coalesce_reevaluations,
    end_with_job_shell,
    env_folder_name,
    env_variants,
    split_folder_key,
    has_data,
    interpreter_command,
    model_inputs,
    plain_text,
    reap_orphans,
    runs_controls,
    record_slurm_failures,
    run_priorities,
    run_started,
    survive_status_outages,
)

# One check, before any job, the one `dpscale check-config` runs (dpscale.study_check): the
# study files read again with dpscale's bounds and merged as check-config merges them, with
# --config's values over them (Snakemake's own loader and merge let a key given twice or an
# empty mapping through), the schema (workflow/schemas/config.schema.yaml plus the keys
# strategies declare) with defaults filled in, the rules a schema cannot express, the
# matrix, expanded once here (plan.study), every imported log, read once, a --profile's
# placeholders (one copied from an old slurm/config.yaml) and a site's own interpreter or
# container (config interpreters), probed: it must import the framework and dpscale's
# runner (cached while nothing changes). The rules read the checked config (config.update
# below).
PROFILE_RESOURCES = getattr(workflow.resource_settings.default_resources, "args", None)
try:
    STUDY = check_study(
        workflow.overwrite_configfiles,
        workflow.config_settings.config,
        default_resources=PROFILE_RESOURCES or (),
    )
except ConfigError as error:
    sys.exit(f"dpscale: config error: {error}")
checked, planned_cells = STUDY.config, STUDY.cells
config.update(checked)

# Snakemake re-runs its job selector once a second per finished job while cells wait for the
# bench slot; one pending re-evaluation at a time keeps its CPU flat
# (launch/snakemake_hooks/scheduler_fix.py).
coalesce_reevaluations()

# Snakemake's SLURM executor keeps its jobs while sacct does not answer (slurmdbd down): it
# asks squeue instead, and stops with one line after a long outage
# (launch/snakemake_hooks/slurm_status.py).
survive_status_outages()
# A cell's job on SLURM: its Snakemake process ends with the job's shell, so that none
# outlives a cancelled, timed-out or preempted job where SLURM tracks processes by parent
# (launch/snakemake_hooks/slurm_job.py)
end_with_job_shell(workflow.remote_exec or workflow.subprocess_exec)
# a cell job SLURM ends in this run without a result is recorded (bench.smk's onerror)
RUN_STARTED = run_started()

RESULTS = f"{config['results_dir']}/{config['study']}"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
LOGS = f"{RESULTS}/logs"
CELLS_DIR = f"{RESULTS}/cells"
DATA = config["train"]["data_dir"]
CELLS = {cell.cell_id: cell for cell in planned_cells}
# The order cells run in on one machine (repeats in turn, drift probes spread through it)
RUN_PRIORITY = run_priorities(list(CELLS.values()))
# Every shell job runs dpscale with the interpreter that runs Snakemake (the analysis
# environment; the framework environments are the launcher's business), and knows the
# study's size for the line a cell's launcher prints when it ends (cells and time left): in
# the environment, not a param, so a changed plan reruns no cell
TO_MEASURE = sum(not cell.skip_reason for cell in CELLS.values())
shell.prefix(
    f"export DPSCALE_PYTHON={shlex.quote(sys.executable)} "
    f"{STUDY_CELLS_ENV}='{len(CELLS)} {TO_MEASURE}'; "
)


# Emulated nodes of a launcher killed with the run before (SIGKILL leaves no chance to clean
# up) are removed once here; every launch does it again before it builds its own.
onstart:
    reaped = reap_orphans()
    if reaped:
        print(f"dpscale: removed namespaces of launchers that died: {reaped}")


# Benchmark cells hold the one bench slot of the machine they run on (profiles/default sets
# the limit to 1); "local" scope means it is not counted for jobs sent to a cluster, where
# every cell has its own allocation.
resource_scopes:
    bench_slot="local",


wildcard_constraints:
    strategy="[a-z0-9-]+",
    model=MODEL_WILDCARD,
    mode="[a-z0-9.-]+",  # a remedy's parameter may be a decimal (2bit-t0.5, cycle0.5)
    nodes="[0-9]+",
    devices="[0-9]+",
    batch="[0-9]+",
    repeat="[0-9]+",
    env="[a-z0-9-]+",
    hash="[0-9a-f]+",


# -- cells (bench.smk) ------------------------------------------------------------------


def cell_for(wildcards):
    cell_id = CELL_PATTERN.format(**wildcards)
    if cell_id not in CELLS:
        raise ValueError(f"{cell_id} is not a cell of study {config['study']!r}")
    return CELLS[cell_id]


def cell_priority(wildcards):
    return RUN_PRIORITY[cell_for(wildcards).cell_id]


def slurm_resource(name):
    """One SLURM resource of a cell's job (dpscale.launch.slurm.resources); None leaves it unset."""
    return lambda wildcards: cell_resource(cell_for(wildcards), config["cluster"], name)


# lock files (dpscale lock) from the config's folder, else beside envs/<name>.txt
LOCKS_DIR = Path(config["env_locks"]).absolute() if config["env_locks"] else None


def env_marker(name):
    try:
        folder = env_folder_name(
            name, locks_dir=LOCKS_DIR, variant=ENV_VARIANTS.get(name, "cpu")
        )
    except LockError as error:
        sys.exit(f"dpscale: {error}")
    return f"{config['env_dir']}/{folder}/{READY_MARKER}"


def locks_args():
    return f"--locks-dir {shlex.quote(str(LOCKS_DIR))}" if LOCKS_DIR else ""


def cell_env_marker(wildcards):
    """Skipped cells need no environment; the others need their framework's.

    ancient(): a rewritten marker of the same environment does not rerun measured cells; a
    new environment (new hash, new path) does, through the changed input.
    """
    cell = cell_for(wildcards)
    env = STRATEGIES[cell.strategy].env
    if cell.skip_reason or env in config["interpreters"]:
        return []
    return ancient(env_marker(env))


def cell_interpreter_args(wildcards, input):
    """How the launcher finds the cell's interpreter: the built environment, or the
    configured one (a change of either reruns the cell, as params do)."""
    configured = config["interpreters"].get(
        STRATEGIES[cell_for(wildcards).strategy].env
    )
    if configured:
        command = list(interpreter_command(configured))
        return f"--interpreter {shlex.quote(json.dumps(command))}"
    prefix = str(Path(input.env).parent) if input.env else "none"
    return f"--env {shlex.quote(prefix)}"


def cell_dataset(wildcards):
    """Training cells read their prepared dataset file; others read no data."""
    cell = cell_for(wildcards)
    if cell.training is None or cell.skip_reason:
        return []
    return cell.training.dataset_file


def cell_ids(mode=None, exclude=()):
    """The study's cells, of one mode or all but some."""
    return [
        cell_id
        for cell_id, cell in CELLS.items()
        if (mode is None or cell.mode == mode) and cell.mode not in exclude
    ]


def cell_results(mode=None, exclude=()):
    return [f"{CELLS_DIR}/{cell_id}.json" for cell_id in cell_ids(mode, exclude)]


def last_drift_probe():
    """The drift probe that closes the trace (None without probes)."""
    probes = [cell for cell in CELLS.values() if cell.drift_probe]
    return max(probes, key=lambda cell: cell.repeat).cell_id if probes else None


def cells_reviewed():
    """What the quality review reads: every measured result but the last drift probe's, so
    the review, and the second measurements it asks for, come before that probe (skipped
    cells, which run after it, have no quality to review)."""
    last = last_drift_probe()
    return [
        f"{CELLS_DIR}/{cell_id}.json"
        for cell_id, cell in CELLS.items()
        if cell_id != last and not cell.skip_reason
    ]


def again_results(mode=None):
    """The second results of the cells the quality review picked (checkpoint
    quality_review, bench.smk): an input of every rule that reads cell results."""
    of_mode = set(cell_ids(mode))

    def second_results(wildcards):
        review = json.loads(
            Path(checkpoints.quality_review.get().output.review).read_text()
        )
        return [
            f"{CELLS_DIR}/{cell_id}.again.json"
            for cell_id in review["measure_again"]
            if cell_id in of_mode
        ]

    return second_results


def study_envs():
    """The environments dpscale builds: the study's, less those the config points elsewhere."""
    envs = {STRATEGIES[name].env for name in config["strategies"]}
    return sorted(envs - set(config["interpreters"]))


# each environment's build: cpu, or the CUDA one the study's driver takes (plan.env_builds)
ENV_VARIANTS = env_variants(config, study_envs())


def cifar10_source_args(wildcards):
    source = config["train"]["cifar10_source"]
    return f"--source {source}" if source else ""


# -- what users measured elsewhere (imports.smk) ----------------------------------------


def imported(kind):
    """The study's imports of one kind (config imports)."""
    return [entry for entry in config["imports"] if entry["kind"] == kind]


def imported_collectives_table():
    """The collectives rule reads the imported all_reduce_perf rows when there are any."""
    return rules.imports.output.collectives if imported("nccl-tests") else []


# -- findings and the communication model (findings.smk, model.smk) ---------------------


TRAINING_TABLES = ("accuracy_delta", "time_to_accuracy", "training_runs", "accuracy")


def training_tables(names=TRAINING_TABLES):
    """Accuracy tables, when the study trains: all of them for the findings and the post
    comparison, the runs alone for the remedies' accuracy."""
    if "train" not in config["modes"]:
        return {}
    return {name: f"{TABLES}/{name}.csv" for name in names}


def report_lines(name):
    """Sentences a rule wrote for the report's texts (tables/<name>.json); empty until then.
    Read when `snakemake --report` parses the workflow: report/*.rst show them."""
    path = Path(f"{TABLES}/{name}.json")
    if not path.is_file():
        return []
    return [plain_text(line) for line in json.loads(path.read_text(encoding="utf-8"))]


def page(path, *tables, **report_args):
    """An output the report lists as a page (report(path, **report_args)), unless every
    table behind it has its header only: then a plain output, made but not listed. Decided
    when the workflow is parsed, as `snakemake --report` parses it after the run, from the
    tables themselves (docs/decisions/report-pages-with-data.md)."""
    return report(path, **report_args) if has_data(*tables) else path


def report_answer():
    """The landing page's answer table, the lines under it and its notes (tables/answer.json,
    findings rule), every cell as plain text; empty until the findings are computed."""
    path = Path(f"{TABLES}/answer.json")
    if not path.is_file():
        return {"columns": [], "rows": [], "below": [], "notes": []}
    answer = json.loads(path.read_text(encoding="utf-8"))
    return {
        "columns": [plain_text(c) for c in answer["columns"]],
        "rows": [[plain_text(v) or "\\ " for v in row] for row in answer["rows"]],
        "below": [plain_text(line) for line in answer.get("below", [])],
        "notes": [plain_text(line) for line in answer["notes"]],
    }


def report_figure(name):
    """A PNG for the landing page as a data URI in lines of 76 characters (report/workflow.rst
    embeds it, the figure directive joins them; docutils refuses a line over 10,000 and
    Snakemake's embeddedfigure directive leaves the path), once it is drawn; else none.
    """
    path = Path(f"{FIGURES}/{name}")
    if not path.is_file():
        return []
    uri = f"data:image/png;base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
    return [uri[start : start + 76] for start in range(0, len(uri), 76)]


# Text that reaches the report from the study file or from results is pasted as plain text
# (render.rst): a study file cannot inject markup or script into a reader's browser.
config["report_description"] = plain_text(config.get("description") or "")
config["report_answer"] = report_answer()
config["report_answer_figure"] = report_figure("answer_speedup.png")
config["model_validation_lines"] = report_lines("model_validation_top")
config["published_lines"] = report_lines("published_cases_top")
config["cluster_lines"] = report_lines("cluster_predictions_top")


def measures_controls():
    """Whether the study runs a control cell (config controls): only then does the report
    get where each layout's loss goes."""
    return runs_controls(CELLS.values())


def measures_remedies():
    """Whether the study runs a cell with a communication remedy (config comm): only then
    does the report get the remedies figure."""
    return any(not c.comm.is_default and not c.skip_reason for c in CELLS.values())


# -- rule all ------------------------------------------------------------------------------


def final_outputs():
    """Every cell and every analysis output; the training outputs only when the study
    trains.
    """
    outputs = cell_results()
    for rule_ in (rules.aggregate, rules.figures_and_tables):
        outputs += list(rule_.output)
    if "train" in config["modes"]:
        outputs += list(rules.accuracy.output)
    if config["imports"]:
        outputs += list(rules.imports.output)
    # the findings and the model read the collectives' outputs in every study, and the
    # report shows every output of the DAG: all are asked for, so a new one is made
    outputs += list(rules.collectives.output)
    outputs += list(rules.remedies.output) + list(rules.findings.output)
    if measures_remedies():
        outputs += list(rules.remedies_figure.output)
    # the model, and with it the exported-log path checked end to end: a status
    # row where it cannot be; and the published cases from a borrowed profile (no cell)
    outputs += list(rules.comm_model.output)
    outputs += list(rules.published_cases.output)
    # the config's clusters, from the one-device cells (clusters.smk): none by default
    if config["clusters"]:
        outputs += list(rules.cluster_predictions.output)
    if config["drift"]["probes"]:
        outputs += list(rules.drift.output)
    if measures_controls():
        outputs += list(rules.loss_breakdown.output)
    if config["compare_with"]:
        outputs += list(rules.compare.output)
    return outputs


def tidy_tables(wildcards):
    """The study's tidy CSVs (every one final_outputs() asks for), for the report's data
    category; not the published cases', the same in every study (its page has every
    column but the cases' own notes, and it stays in tables/)."""
    wanted = final_outputs()
    tables = {str(path) for path in wanted if str(path).endswith(".csv")}
    return sorted(tables - {str(rules.published_cases.output.table)})
