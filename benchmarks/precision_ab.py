"""amp_bf16 against amp_fp16 on one GPU, alternated in one process, and where the time goes.

The H200 cells of 2026-11-25 read amp_fp16 faster than amp_bf16 (ResNet-50, batch 256,
channels_last), measured minutes apart with no alternation. This script builds the cell's
model and training step (``torch_ops.make_train_step``: autocast, the grad scaler for fp16,
SGD) once per precision, then times them in turns (A B A B ...), so drift falls on both. Then
torch's profiler sums each step's GPU time by kernel family, to say which kernels differ.
No DDP wrapper: what differs between the precisions is the model's kernels.

    python benchmarks/precision_ab.py STUDY.yaml [--rounds 6] [--steps 10] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from dpscale.frameworks.torch_ops import build_model, configure_threads, make_train_step
from dpscale.plan.config_files import study_config
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

PRECISIONS = ("amp_bf16", "amp_fp16")
# Kernel name fragments, first match wins: how the profile's kernels are summed
FAMILIES = (
    ("batch norm", ("batch_norm", "batchnorm", "bn_")),  # cuDNN's names hold "nhwc" too
    ("convolution", ("conv", "xmma", "implicit", "wgrad", "dgrad", "fprop", "nhwc", "cudnn")),
    ("gemm", ("gemm", "cutlass", "sm90")),
    ("grad scaler", ("amp_", "non_finite", "unscale")),
    ("optimizer", ("multi_tensor", "foreach", "sgd")),
    ("elementwise", ("elementwise", "vectorized", "reduce", "copy", "fill")),
)


def first_cell(study_file: Path):
    _, cells = plan_study(study_config([study_file]), STRATEGIES)
    return max((c for c in cells if c.mode == "synthetic"), key=lambda c: c.batch_per_device)


def family(kernel: str) -> str:
    name = kernel.lower()
    for label, fragments in FAMILIES:
        if any(fragment in name for fragment in fragments):
            return label
    return "other"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(step, steps: int, device: torch.device) -> float:
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return (time.perf_counter() - start) / steps


def kernel_profile(step, device: torch.device) -> tuple[dict[str, float], list]:
    """GPU milliseconds per step by kernel family, and the 12 costliest kernels (3 steps)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            step()
        sync(device)
    totals: dict[str, float] = defaultdict(float)
    kernels = []
    for event in prof.key_averages():
        gpu_us = getattr(event, "self_device_time_total", 0.0)
        if gpu_us > 0 and event.device_type.name == "CUDA":
            totals[family(event.key)] += gpu_us / 1e3 / 3
            kernels.append((event.key[:120], round(gpu_us / 1e3 / 3, 3), event.count // 3))
    top = sorted(kernels, key=lambda k: -k[1])[:12]
    return {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}, top


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    base = first_cell(args.study)
    steps, device = {}, None
    for precision in PRECISIONS:
        cell = dataclasses.replace(base, precision=precision)
        configure_threads(cell)
        device = torch.device("cuda" if cell.accelerator == "cuda" else "cpu")
        model, _ = build_model(cell, device)
        steps[precision] = make_train_step(cell, model, device, cell.batch_per_device)
        timed_steps(steps[precision], args.warmup, device)
    seconds = {p: [] for p in PRECISIONS}
    for round_ in range(args.rounds):
        order = PRECISIONS if round_ % 2 == 0 else PRECISIONS[::-1]
        for precision in order:
            seconds[precision].append(timed_steps(steps[precision], args.steps, device))
    batch = base.batch_per_device
    result = {
        "cell": base.cell_id,
        "batch": batch,
        "device": str(torch.cuda.get_device_name()) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "precisions": {},
    }
    for precision in PRECISIONS:
        rates = [batch / s for s in seconds[precision]]
        families, top = kernel_profile(steps[precision], device)
        result["precisions"][precision] = {
            "img_s_per_round": rates,
            "img_s_median": statistics.median(rates),
            "gpu_ms_per_step_by_family": families,
            "top_kernels_ms_per_step_calls": top,
        }
        print(
            precision,
            f"median {statistics.median(rates):.0f} img/s",
            f"rounds {[round(r) for r in rates]}",
        )
        print("  GPU ms/step:", json.dumps(families))
        for name, ms, calls in top:
            print(f"  {ms:8.3f} ms x{calls:<4} {name}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
