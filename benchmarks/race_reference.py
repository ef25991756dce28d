"""Race each strategy against its framework's canonical synthetic benchmark, alternating.

    .venv/bin/python benchmarks/race_reference.py [--strategies torch-ddp horovod-tf mxnet-dist]
        [--ranks 2 1] [--pairs 3] [--batch 16] [--env-dir .envs] [--both-env KEY=VALUE ...]

A = a dpscale cell run through the launcher's stable CLI (``python -m dpscale.launch``),
B = the reference protocol (benchmarks/reference/): Horovod's
tensorflow2_synthetic_benchmark.py for horovod-tf, its pytorch_synthetic_benchmark.py with
torch.distributed DDP for torch-ddp, a Gluon dist_sync loop for mxnet-dist. Same model
(dpscale's ResNet-18, imagenet stem, 64 px, 10 classes), per-device batch, ranks, 1 thread
per rank, 10 warm-up batches and 10 iterations of 10 batches; launched as the launcher
launches (torchrun, horovodrun --gloo, dpscale.launch.starters.mxnet_ps) from the same environment.

Runs alternate, and the order within a pair alternates too (A B, B A, A B, B A): this
machine's speed drifts by tens of percent over minutes even when nothing else runs (a VM),
and with A always first a drift would bias every pair the same way; with the order
counterbalanced over an even number of pairs, a steady drift pushes half the pairs up and
half down. For each strategy and rank count the script prints dpscale / reference as the
median over pairs of the per-pair ratios, in both conventions:

- reference convention: rank 0's img/s per iteration x ranks, mean over iterations
  (what Horovod's examples print as "Total img/sec");
- dpscale convention: global img/s of each window from its slowest rank, mean over windows.

The script holds the machine's bench lock (the launcher's flock on
``<tmp>/dpscale-bench-cpu.lock``) for the whole race, so no dpscale cell of anyone else
overlaps, and gives its own dpscale runs a private lock folder (``DPSCALE_LOCK_DIR``). It
samples the machine's foreign CPU during each run (dpscale.launch.contention) and prints it;
a contaminated run is rerun (``--reruns`` times at most) and a pair that stays contaminated
is reported as such.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import page
from dpscale.launch import contention
from dpscale.launch.setup.envs import env_prefix
from dpscale.plan.cell import SYNTHETIC_SGD, Cell, Measure, ModelConfig
from dpscale.plan.paths import REPO_ROOT, SRC_DIR

MODEL = ModelConfig("resnet18", "imagenet", 64, 10)
ENVS = {"torch-ddp": "torch", "horovod-tf": "tf-horovod", "mxnet-dist": "mxnet"}
REFERENCE = REPO_ROOT / "benchmarks" / "reference"
TIMEOUT_S = 900


@dataclass(frozen=True)
class Protocol:
    batch: int = 16
    threads: int = 1
    warmup: int = 10
    iterations: int = 10
    batches_per_iteration: int = 10
    dpscale_optimizer: bool = False  # the reference gets dpscale's momentum and decay


@dataclass(frozen=True)
class Run:
    """One timed run: every rank's iteration (window) seconds, and the machine's load."""

    per_rank_seconds: list[list[float]]
    quality: str
    foreign_cores: float | None

    def reference_convention(self, p: Protocol) -> float:
        ranks = len(self.per_rank_seconds)
        rates = [p.batch * p.batches_per_iteration / s for s in self.per_rank_seconds[0]]
        return ranks * statistics.fmean(rates)

    def dpscale_convention(self, p: Protocol) -> float:
        ranks = len(self.per_rank_seconds)
        slowest = [max(window) for window in zip(*self.per_rank_seconds, strict=True)]
        return statistics.fmean(ranks * p.batch * p.batches_per_iteration / s for s in slowest)


@contextmanager
def machine_lock() -> Iterator[None]:
    path = Path(tempfile.gettempdir()) / "dpscale-bench-cpu.lock"
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {path} (a dpscale cell is measuring)", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def process_env(prefix: Path, threads: int, extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(SRC_DIR), env.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        OPENBLAS_NUM_THREADS=str(threads),
        PATH=os.pathsep.join([str(prefix / "bin"), env.get("PATH", "")]),
        **extra,
    )
    return env


def reference_command(strategy: str, prefix: Path, ranks: int, p: Protocol) -> list[str]:
    python = str(prefix / "bin" / "python")
    script = {"torch-ddp": "torch", "horovod-tf": "tf2", "mxnet-dist": "mxnet"}[strategy]
    args = [
        str(REFERENCE / f"{script}_synthetic.py"),
        f"--batch-size={p.batch}",
        f"--num-warmup-batches={p.warmup}",
        f"--num-batches-per-iter={p.batches_per_iteration}",
        f"--num-iters={p.iterations}",
    ]
    if p.dpscale_optimizer:  # the runners' SGD (plan.cell.SGD): same work on both sides
        sgd = SYNTHETIC_SGD
        args += [f"--momentum={sgd.momentum}", f"--weight-decay={sgd.weight_decay}"]
    if strategy == "torch-ddp":
        return [python, "-m", "torch.distributed.run", "--standalone"] + [
            f"--nproc_per_node={ranks}",
            *args,
            f"--threads={p.threads}",
        ]
    if strategy == "horovod-tf":
        horovodrun = str(prefix / "bin" / "horovodrun")
        hosts = f"localhost:{ranks}"
        return [horovodrun, "-np", str(ranks), "-H", hosts, "--gloo", python, *args] + [
            f"--threads={p.threads}"
        ]
    return [
        python,
        "-m",
        "dpscale.launch.starters.mxnet_ps",
        f"--workers={ranks}",
        "--servers=1",
    ] + [
        f"--timeout={TIMEOUT_S}",
        "--",
        python,
        *args,
    ]


def parse_reference(output: str, ranks: int) -> tuple[list[list[float]], list[float]]:
    """Per-rank seconds and rank 0's timed span from RACE_RESULT / RACE_RANK lines."""
    for line in output.splitlines():
        if "RACE_RESULT " in line:
            data = json.loads(line.split("RACE_RESULT ", 1)[1])
            return data["per_rank_seconds"], data["span"]
    found = {}
    for line in output.splitlines():
        if "RACE_RANK " in line:
            data = json.loads(line.split("RACE_RANK ", 1)[1])
            found[data["rank"]] = data
    if len(found) != ranks:
        raise RuntimeError(f"reference printed {len(found)} of {ranks} ranks:\n{output[-3000:]}")
    return [found[r]["seconds"] for r in range(ranks)], found[0]["span"]


def judged(sampler: contention.ContentionSampler, span: Sequence[float], used: int):
    summary = contention.summarise_contention(sampler.samples, span, sampler.cpus, used)
    return contention.verdict(summary)[0], summary["foreign_cpu_cores_mean"]


def run_reference(
    strategy: str, prefix: Path, ranks: int, p: Protocol, extra_env: dict[str, str]
) -> Run:
    command = reference_command(strategy, prefix, ranks, p)
    with contention.sampling() as sampler:
        done = subprocess.run(
            command,
            env=process_env(prefix, p.threads, extra_env),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        output = done.stdout + done.stderr
        raise RuntimeError(f"reference failed ({done.returncode}):\n{output[-3000:]}")
    seconds, span = parse_reference(done.stdout + done.stderr, ranks)
    return Run(seconds, *judged(sampler, span, ranks * p.threads))


def run_dpscale(
    strategy: str, prefix: Path, ranks: int, p: Protocol, extra_env: dict[str, str]
) -> Run:
    measure = Measure(p.warmup, p.iterations, p.batches_per_iteration, timeout_s=TIMEOUT_S)
    cell = Cell(
        "race",
        strategy,
        MODEL,
        "synthetic",
        1,
        ranks,
        p.batch,
        measure=measure,
        threads_per_device=p.threads,
    )
    with tempfile.TemporaryDirectory(prefix="dpscale-race-") as scratch:
        out, log = cell.result_path(scratch), Path(scratch) / "cell.log"
        env = process_env(prefix, p.threads, {"DPSCALE_LOCK_DIR": scratch, **extra_env})
        command = [sys.executable, "-m", "dpscale.launch", "--cell", cell.to_json()]
        command += ["--env", str(prefix), "--out", str(out), "--log", str(log)]
        subprocess.run(command, env=env, timeout=TIMEOUT_S + 60, check=True)
        result = json.loads(out.read_text())
        if result["status"] != "ok":
            raise RuntimeError(f"dpscale cell {result['status']}: {result['reason']}")
    measurement = result["measurement"]
    foreign = result["system"]["contention"]["foreign_cpu_cores_mean"]
    return Run(measurement["per_rank_window_seconds"], result["quality"], foreign)


def clean_run(make, reruns: int) -> Run:
    """A run that is not contaminated, rerun up to ``reruns`` times."""
    for attempt in range(reruns + 1):
        run = make()
        if run.quality != "contaminated" or attempt == reruns:
            return run
        print(f"    contaminated (foreign {run.foreign_cores:.2f} cores): rerun", flush=True)
    raise AssertionError("unreachable")


def describe(label: str, run: Run, p: Protocol) -> str:
    return (
        f"  {label:9s} ref-conv {run.reference_convention(p):7.2f}  "
        f"dpscale-conv {run.dpscale_convention(p):7.2f} img/s  "
        f"foreign {run.foreign_cores if run.foreign_cores is not None else float('nan'):.2f} "
        f"cores ({run.quality})"
    )


def race(
    strategy: str,
    ranks: int,
    pairs: int,
    p: Protocol,
    env_dir: str,
    reruns: int,
    extra_env,
    both_env: dict[str, str] | None = None,
) -> dict:
    prefix = env_prefix(ENVS[strategy], env_dir)
    if not (prefix / ".dpscale-env-ready").exists():
        raise SystemExit(f"{prefix} is not built (make envs)")
    ratios: dict[str, list[float]] = {"reference": [], "dpscale": []}
    qualities, foreign = [], []
    print(f"{strategy}, {ranks} rank(s):", flush=True)
    both = both_env or {}
    makers = {
        "dpscale": lambda: run_dpscale(strategy, prefix, ranks, p, {**both, **extra_env}),
        "ref": lambda: run_reference(strategy, prefix, ranks, p, both),
    }
    for pair in range(pairs):
        runs = {}
        order = ("dpscale", "ref") if pair % 2 == 0 else ("ref", "dpscale")
        for side in order:
            runs[side] = clean_run(makers[side], reruns)
            print(describe(f"{side} {pair + 1}", runs[side], p), flush=True)
        a, b = runs["dpscale"], runs["ref"]
        ratios["reference"].append(a.reference_convention(p) / b.reference_convention(p))
        ratios["dpscale"].append(a.dpscale_convention(p) / b.dpscale_convention(p))
        qualities += [a.quality, b.quality]
        foreign += [a.foreign_cores, b.foreign_cores]
    summary = {
        "strategy": strategy,
        "ranks": ranks,
        "pairs": pairs,
        "ratio_reference_convention": statistics.median(ratios["reference"]),
        "ratio_dpscale_convention": statistics.median(ratios["dpscale"]),
        "per_pair": ratios,
        "qualities": qualities,
        "foreign_cores": foreign,
    }
    print(
        f"{strategy} x{ranks}: dpscale/reference (median of {pairs} pairs) = "
        f"{summary['ratio_reference_convention']:.3f} (reference convention), "
        f"{summary['ratio_dpscale_convention']:.3f} (dpscale convention); "
        f"runs {', '.join(qualities)}",
        flush=True,
    )
    return summary


def page_table(summaries: list[dict]) -> str:
    """Per strategy x ranks: the median ratio and the pairs' ratios in both conventions."""
    rows = []
    for s in summaries:
        pairs = s["per_pair"]
        runs = {q: s["qualities"].count(q) for q in dict.fromkeys(s["qualities"])}
        rows.append(
            [s["strategy"], s["ranks"], f"{s['ratio_reference_convention']:.3f}"]
            + [" ".join(f"{r:.3f}" for r in pairs["reference"])]
            + [f"{s['ratio_dpscale_convention']:.3f}"]
            + [" ".join(f"{r:.3f}" for r in pairs["dpscale"])]
            + [", ".join(f"{n} {q}" for q, n in runs.items())]
        )
    header = ["strategy", "ranks", "ref. conv.", "pairs (ref. conv.)", "dpscale conv."]
    return page.table(header + ["pairs (dpscale conv.)", "runs"], rows)


def load_text(summaries: list[dict]) -> str:
    """The foreign CPU of the runs kept, for the page's machine line."""
    cores = [c for s in summaries for c in s["foreign_cores"] if c is not None]
    if not cores:
        return "foreign CPU not known for any run"
    unknown = sum(len(s["foreign_cores"]) for s in summaries) - len(cores)
    return f"foreign CPU {min(cores):.2f}-{max(cores):.2f} cores mean per run" + (
        f"; not known for {unknown} of the runs" if unknown else ""
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--ranks", nargs="+", type=int, default=[2, 1])
    parser.add_argument("--pairs", type=int, default=4, help="even: the order is balanced")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--reruns", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10, help="smoke tests only")
    parser.add_argument(
        "--reference-optimizer",
        choices=["reference", "dpscale"],
        default="reference",
        help="dpscale: the reference runs dpscale's SGD (momentum 0.9, L2 decay) instead of "
        "its plain SGD, so the ratio is the harness alone",
    )
    parser.add_argument("--env-dir", default=".envs")
    parser.add_argument("--json", type=Path, help="also write the summaries here")
    parser.add_argument(
        "--dpscale-env", nargs="*", default=[], help="KEY=VALUE for the dpscale runs only"
    )
    parser.add_argument(
        "--both-env",
        nargs="*",
        default=[],
        help="KEY=VALUE for both sides, e.g. TF_ENABLE_ONEDNN_OPTS=1 (the dpscale cell sets "
        "it itself by default: tensorflow_onednn) or ONEDNN_MAX_CPU_ISA=AVX2",
    )
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    p = Protocol(
        batch=args.batch,
        iterations=args.iterations,
        dpscale_optimizer=args.reference_optimizer == "dpscale",
    )
    extra = dict(item.split("=", 1) for item in args.dpscale_env)
    both = dict(item.split("=", 1) for item in args.both_env)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    summaries = []
    with machine_lock():
        for strategy in args.strategies:
            for ranks in args.ranks:
                summaries.append(
                    race(strategy, ranks, args.pairs, p, args.env_dir, args.reruns, extra, both)
                )
    print(f"started {started}")
    for s in summaries:
        print(
            f"{s['strategy']:10s} x{s['ranks']}: {s['ratio_reference_convention']:.3f} "
            f"(reference convention)  {s['ratio_dpscale_convention']:.3f} (dpscale convention)"
        )
    if args.json:
        args.json.write_text(json.dumps({"started": started, "races": summaries}, indent=2))
    caption = (
        f"dpscale / reference, median over pairs (order alternating); batch {p.batch} per "
        f"rank, {p.iterations} iterations of {p.batches_per_iteration} batches; reference "
        f"optimizer: {args.reference_optimizer}; both sides' settings: "
        f"{' '.join(args.both_env) or 'none'}. ref. conv.: rank 0's img/s x ranks; "
        "dpscale conv.: global img/s from the slowest rank per window."
    )
    tables = [caption, page_table(summaries)]
    page.print_page(
        "Races against the reference benchmarks", tables, run, load_text(summaries), args.page
    )


if __name__ == "__main__":
    main()
