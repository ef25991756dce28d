"""Checks of the Snakemake profile a run uses (``--profile slurm``), at plan time: a value
left as the shipped placeholder fails before any job is submitted, with the key named."""

from __future__ import annotations

from collections.abc import Iterable

from dpscale.plan.errors import ConfigError

PLACEHOLDER = "CHANGE_ME"
WHERE = {
    "slurm_account": "your SLURM account (sacctmgr show assoc user=$USER), or delete the line "
    "to let the SLURM executor plugin guess it from your past jobs",
    "slurm_partition": "the partition to measure on (sinfo -s)",
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
                "in the profile's config.yaml (shipped as slurm/config.yaml)"
            )
