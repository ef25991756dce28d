"""Stand-ins for a SLURM cluster's commands and probe output, for tests without one."""

from __future__ import annotations


def no_scontrol(command):
    """scontrol as on a machine without SLURM: nothing to say."""
    return None


def node(name, index, cpus=32, gpus=4, visible="0,1,2,3"):
    """One node's line of the probe step (dpscale.launch.slurm.allocation.probe_command)."""
    return {
        "node": name,
        "node_index": index,
        "job_cpus_on_node": cpus,
        "cpus_usable": 1,
        "cuda_visible_devices": visible,
        "gpus": [{"name": "NVIDIA A100"}] * gpus,
    }
