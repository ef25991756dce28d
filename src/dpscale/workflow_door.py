"""The workflow's one door into dpscale: everything ``Snakefile`` and ``workflow/rules/*.smk``
use, and nothing more.

The workflow is an entry point beside ``cli.py``: Snakemake parses the rules, plans the study
and launches cells without going through the command line. Importing from here alone keeps
what it depends on in one list that ``tests/unit/test_boundaries.py`` checks, so a module can
move inside dpscale without a rule file changing, and a rule cannot reach into a module the
architecture does not let it (docs/architecture.md, the rooms). The rules' bodies are the
other way in (``workflow/scripts/step.py`` calls ``dpscale.steps``). This module only
re-exports: no logic lives here.
"""

from __future__ import annotations

# launching: emulated nodes left behind, environments and their locks, a site's own
# interpreter, a cell's SLURM resources and the jobs SLURM ended, Snakemake's job selector
from dpscale.launch.emulation.netns import reap_orphans
from dpscale.launch.setup.envs import READY_MARKER, LockError, env_folder_name, split_folder_key
from dpscale.launch.setup.interpreters import configured as interpreter_command
from dpscale.launch.slurm.faults import record_after_error as record_slurm_failures
from dpscale.launch.slurm.faults import started as run_started
from dpscale.launch.slurm.resources import cell_resource
from dpscale.launch.snakemake_hooks.scheduler_fix import coalesce_reevaluations
from dpscale.launch.snakemake_hooks.slurm_job import end_with_job_shell
from dpscale.launch.snakemake_hooks.slurm_status import survive_status_outages

# planning: the order cells run in, the cell id as the rules' wildcards, the study's size
# told to each cell's launcher, the links the communication model reads (parsed once, here),
# the clusters' files, whether control cells run (the loss breakdown's pages)
from dpscale.plan.cell import CELL_PATTERN, MODEL_WILDCARD
from dpscale.plan.cluster_file import cluster_inputs, cluster_paths
from dpscale.plan.control_cells import runs_controls
from dpscale.plan.env_builds import env_variants
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import run_priorities
from dpscale.plan.model_inputs import model_inputs
from dpscale.plan.progress import STUDY_CELLS_ENV
from dpscale.plan.published import published_files
from dpscale.registry import STRATEGIES

# the report lists a page only where its table has a row; a study's own words, shown in the
# report as plain text
from dpscale.render.pages import has_data
from dpscale.render.rst import plain_text

# the one plan-time check of a study, the one `dpscale check-config` runs too: its files
# read with bounds, its config and cells, imported logs, a profile's defaults, interpreters
from dpscale.study_check import check_study

__all__ = [
    # planning
    "CELL_PATTERN",
    "MODEL_WILDCARD",
    "STRATEGIES",
    "STUDY_CELLS_ENV",
    "ConfigError",
    "check_study",
    "cluster_inputs",
    "cluster_paths",
    "model_inputs",
    "published_files",
    "run_priorities",
    "runs_controls",
    # launching
    "READY_MARKER",
    "LockError",
    "cell_resource",
    "coalesce_reevaluations",
    "end_with_job_shell",
    "env_folder_name",
    "env_variants",
    "split_folder_key",
    "interpreter_command",
    "reap_orphans",
    "record_slurm_failures",
    "run_started",
    "survive_status_outages",
    # the report's pages and text
    "has_data",
    "plain_text",
]
