"""The gap scripts' job (torch_ddp_gap.py, horovod_tf_gap.py): one launcher run, measured.

run_gap_job holds the machine's bench lock (no dpscale cell measures meanwhile), samples the
foreign CPU around the job, prints it with its verdict, and returns the per-rank seconds the
job's rank 0 printed on its ``GAP_RESULT`` line, with the load as the page words it.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import tempfile
from pathlib import Path

from dpscale.launch import contention


def run_gap_job(
    command: list[str], env: dict[str, str], ranks: int, launcher: str
) -> tuple[list[dict[str, list[float]]], str]:
    """(per-rank {variant: seconds per round}, load); exits if ``launcher`` failed."""
    lock = Path(tempfile.gettempdir()) / "dpscale-bench-cpu.lock"
    with open(lock, "w") as handle, contention.sampling() as sampler:
        fcntl.flock(handle, fcntl.LOCK_EX)  # no dpscale cell measures meanwhile
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    load = contention.summarise_contention(sampler.samples, None, sampler.cpus, ranks)
    shown = (
        f"{load['foreign_cpu_cores_mean']:.2f} cores mean, "
        f"{load['foreign_cpu_cores_max']:.2f} max ({contention.verdict(load)[0]})"
    )
    print(f"foreign CPU during the job: {shown}")
    output = done.stdout + done.stderr
    lines = [line for line in output.splitlines() if "GAP_RESULT " in line]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{launcher} failed ({done.returncode}):\n{output[-4000:]}")
    return json.loads(lines[0].split("GAP_RESULT ", 1)[1]), f"foreign CPU during the job {shown}"
