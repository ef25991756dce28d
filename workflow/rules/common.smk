import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

from dpscale.launch.cluster import cell_resource
from dpscale.plan.config import ConfigError, check_config
from dpscale.launch.envs import READY_MARKER, env_folder_name
from dpscale.plan.matrix import expand as expand_matrix
from dpscale.registry import STRATEGIES

try:
    config.update(check_config(config, STRATEGIES))
except ConfigError as error:
    sys.exit(f"dpscale: config error: {error}")
validate(config, "../schemas/config.schema.yaml")

# Every shell job runs dpscale with the interpreter that runs Snakemake (the analysis
# environment); the framework environments are the launcher's business.
shell.prefix(f"export DPSCALE_PYTHON={shlex.quote(sys.executable)}; ")
RESULTS = f"{config['results_dir']}/{config['study']}"
CELLS = {cell.cell_id: cell for cell in expand_matrix(config, STRATEGIES)}
CELL_PATTERN = "{strategy}/{model}/{mode}/n{nodes}-d{devices}-b{batch}-r{repeat}"


# Benchmark cells hold the one bench slot of the machine they run on (profiles/default sets
# the limit to 1); "local" scope means it is not counted for jobs sent to a cluster, where
# every cell has its own allocation.
resource_scopes:
    bench_slot="local",


wildcard_constraints:
    strategy="[a-z0-9-]+",
    model="[a-z0-9]+-[a-z]+[0-9]+-c[0-9]+",
    mode="[a-z0-9-]+",
    nodes="[0-9]+",
    devices="[0-9]+",
    batch="[0-9]+",
    repeat="[0-9]+",
    env="[a-z0-9-]+",
    hash="[0-9a-f]+",


def cell_for(wildcards):
    cell_id = CELL_PATTERN.format(**wildcards)
    if cell_id not in CELLS:
        raise ValueError(f"{cell_id} is not a cell of study {config['study']!r}")
    return CELLS[cell_id]


def slurm_resource(name):
    """One SLURM resource of a cell's job (dpscale.launch.cluster); None leaves it unset."""
    return lambda wildcards: cell_resource(cell_for(wildcards), config["cluster"], name)


def env_marker(name):
    return f"{config['env_dir']}/{env_folder_name(name)}/{READY_MARKER}"


def cell_env_marker(wildcards):
    """Skipped cells need no environment; the others need their framework's.

    ancient(): a rewritten marker of the same environment does not rerun measured cells; a
    new environment (new hash, new path) does, through the changed input.
    """
    cell = cell_for(wildcards)
    if cell.skip_reason:
        return []
    return ancient(env_marker(STRATEGIES[cell.strategy].env))


def cell_results(mode=None, exclude=()):
    return [
        f"{RESULTS}/cells/{cell_id}.json"
        for cell_id, cell in CELLS.items()
        if (mode is None or cell.mode == mode) and cell.mode not in exclude
    ]


def study_envs():
    return sorted({STRATEGIES[name].env for name in config["strategies"]})


def cell_dataset(wildcards):
    """Training cells read their prepared dataset file; others read no data."""
    cell = cell_for(wildcards)
    if cell.training is None or cell.skip_reason:
        return []
    return cell.training.dataset_file


def cifar10_source_args(wildcards):
    source = config["train"]["cifar10_source"]
    return f"--source {source}" if source else ""


def training_outputs():
    if "train" not in config["modes"]:
        return []
    tables = ["training_runs.csv", "training_epochs.csv", "accuracy.csv"]
    tables += ["accuracy_delta.csv", "time_to_accuracy.csv"]
    tables += ["accuracy_delta.html", "time_to_accuracy.html"]
    figures = ["accuracy.png", "epoch_time.png"]
    return [f"{RESULTS}/tables/{name}" for name in tables] + [
        f"{RESULTS}/figures/{name}" for name in figures
    ]


def collectives_outputs():
    """The collectives tables and figure (workflow/rules/collectives.smk), when measured."""
    if "collectives" not in config["modes"]:
        return []
    tables = ["collectives.csv", "comm_fits.csv", "comm_fits.html"]
    return [f"{RESULTS}/tables/{name}" for name in tables] + [
        f"{RESULTS}/figures/collectives_busbw.png"
    ]


def final_outputs():
    tables = ["cells.csv", "windows.csv", "fits.csv", "scaling.csv", "break_even.csv"]
    tables += ["repeatability.csv"]
    figures = ["throughput.png", "speedup.png", "residuals.png", "frameworks.png"]
    html = [
        "fits.html",
        "cells.html",
        "scaling.html",
        "break_even.html",
        "repeatability.html",
    ]
    return (
        cell_results()
        + [f"{RESULTS}/tables/{name}" for name in tables]
        + [f"{RESULTS}/figures/{name}" for name in figures]
        + [f"{RESULTS}/tables/{name}" for name in html]
        + training_outputs()
        + collectives_outputs()
        + findings_outputs()  # workflow/rules/findings.smk
        + model_outputs()  # workflow/rules/model.smk
    )
