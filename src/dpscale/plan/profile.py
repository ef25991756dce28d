"""Checks of the Snakemake profile a run uses (``--profile``), at plan time. The shipped
SLURM profile (slurm/config.yaml) holds no placeholder: the account and partition come from
SBATCH_ACCOUNT and SBATCH_PARTITION, the command line or the user's own profile
(docs/guide/slurm.md). A profile copied from an older one may still read ``CHANGE_ME``:
that fails before any job is submitted, with the key named."""

from __future__ import annotations

from collections.abc import Iterable

from dpscale.plan.errors import ConfigError

PLACEHOLDER = "CHANGE_ME"
WHERE = {
    "slurm_account": "your SLURM account (sacctmgr show assoc user=$USER), or delete the line "
    "to let the SLURM executor plugin guess it from your past jobs",
    "slurm_partition": "the partition to measure on (sinfo -s), or delete the line to take "
    "the cluster's default partition",
}


def check_default_resources(assignments: Iterable[str]) -> None:
    """``assignments`` are the profile's ``default-resources`` as ``key=value`` strings
    (Snakemake's ``workflow.resource_settings.default_resources.args``)."""
    for assignment in assignments:
        key, _, value = assignment.partition("=")
        if value.strip().strip("'\"") == PLACEHOLDER:
            wanted = WHERE.get(key, "a value for your cluster")
            raise ConfigError(
                f"profile default-resources.{key} is still {PLACEHOLDER}: set it to {wanted} "
                "in your profile's config.yaml (or give it as SBATCH_ACCOUNT / SBATCH_PARTITION "
                "with the shipped profile: docs/guide/slurm.md)"
            )
