"""The launcher's own CPU while its runner runs: this tree against another (e.g. older) one.

    .venv/bin/python benchmarks/launcher_footprint.py [--seconds 20 60] [--before /tmp/old/src]

Runs ``dpscale.launch.launch`` in a fresh interpreter on a 1-device cell whose runner
sleeps (twice: a short and a long run) and then writes a result (a fake runner: no
framework needed, so the launcher's cost is not hidden in a busy machine's noise), and
prints the launcher process's
own CPU time (``getrusage(RUSAGE_SELF)``, user + system, around the ``launch`` call: the
wait for the runner, the contention sampler, writing the result). The difference between
the two runs over their difference in wall time is the launcher's CPU per second while a
runner runs (what competes with the cell's timed windows); the rest is paid once.
With ``--before``, the same is measured with that source tree first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import page
from dpscale.plan.paths import SRC_DIR

RUNNER = textwrap.dedent(
    """
    import sys, time
    from dpscale.plan.result import now_iso
    from dpscale.runner.records import write_synthetic_result
    from dpscale.runner.support import parse_runner_args
    cell, out = parse_runner_args()
    time.sleep({seconds})
    write_synthetic_result(cell, out, started_at=now_iso(), per_rank_windows=[[1.0, 1.0]],
        framework="fake", framework_versions={{"fake": "1"}}, threads_used=1, trainable_params=1)
    """
)

DRIVER = textwrap.dedent(
    """
    import resource, sys, time
    from pathlib import Path
    from dpscale.launch import launcher
    from dpscale.plan.cell import Cell, Measure, ModelConfig
    from dpscale.registry import Strategy
    fake = Strategy("torch-ddp", "fake", "fake", launch="single", runner="fake_runner",
                    one_process=False, multi_node=True)
    launcher.strategy = lambda name: fake
    if "--no-sampler" in sys.argv:  # the wait alone: what the sampler costs is the rest
        sampling = launcher.contention.sampling
        launcher.contention.sampling = lambda enabled=True: sampling(enabled=False)
    scratch = Path(sys.argv[1])
    cell = Cell("footprint", "torch-ddp", ModelConfig("resnet18", "cifar", 32, 10), "synthetic",
                1, 1, 8, measure=Measure(1, 2, 1, timeout_s=600))
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    status = launcher.launch(cell, cell.result_path(scratch), scratch / "env", scratch / "log")
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{status} {cpu:.4f} {wall:.2f}")
    """
)


def measure(src: Path, seconds: int, sampler: bool = True) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="dpscale-footprint-") as scratch:
        root = Path(scratch)
        (root / "env" / "bin").mkdir(parents=True)
        (root / "env" / "bin" / "python").symlink_to(sys.executable)
        (root / "modules").mkdir()
        (root / "modules" / "fake_runner.py").write_text(RUNNER.format(seconds=seconds))
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(src), str(root / "modules")]),
            DPSCALE_LOCK_DIR=scratch,
        )
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, scratch] + ([] if sampler else ["--no-sampler"]),
            env=env,
            capture_output=True,
            text=True,
            timeout=seconds + 120,
            check=True,
        )
    status, cpu, wall = done.stdout.split()[-3:]
    if status != "ok":
        raise SystemExit(f"launch ended {status}: {done.stderr[-2000:]}")
    return float(cpu), float(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, nargs=2, default=[20, 60])
    parser.add_argument("--before", type=Path, help="another source tree to compare with")
    parser.add_argument(
        "--no-sampler", action="store_true", help="this tree without the contention sampler"
    )
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    rows = []
    trees = ([("before", args.before)] if args.before else []) + [("this tree", SRC_DIR)]
    if args.no_sampler:
        trees[-1] = ("no sampler", SRC_DIR)
    short, long = args.seconds
    for label, src in trees:
        sampler = not (args.no_sampler and src == SRC_DIR)
        (cpu_a, wall_a), (cpu_b, wall_b) = measure(src, short, sampler), measure(src, long, sampler)
        per_second = (cpu_b - cpu_a) / (wall_b - wall_a)
        print(
            f"{label:9s}: launcher CPU {cpu_a:.3f} s over {wall_a:.1f} s, {cpu_b:.3f} s over "
            f"{wall_b:.1f} s: {1000 * per_second:.2f} ms per second while the runner runs "
            f"({100 * per_second:.3f}% of a core), {cpu_a - per_second * wall_a:.3f} s once",
            flush=True,
        )
        rows.append(
            [label, f"{cpu_a:.3f}", f"{wall_a:.1f}", f"{cpu_b:.3f}", f"{wall_b:.1f}"]
            + [f"{1000 * per_second:.2f}", f"{100 * per_second:.3f}"]
            + [f"{cpu_a - per_second * wall_a:.3f}"]
        )
    header = ["tree", "short: CPU s", "short: wall s", "long: CPU s", "long: wall s"]
    header += ["ms CPU per s", "% of a core", "once: CPU s"]
    caption = (
        "The launcher's own CPU (user + system) around launch() of a fake runner that sleeps; "
        "ms CPU per s: (long - short CPU) / (long - short wall), while the runner runs."
    )
    table = page.table(header, rows)
    page.print_page("Launcher CPU footprint", [caption, table], run, path=args.page)


if __name__ == "__main__":
    main()
