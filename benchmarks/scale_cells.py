"""Generated studies and results for benchmarks/scale.py: a study file of about N cells and a
result JSON for every cell it plans, as if a cluster had measured them all.

The study is synthetic throughput only (no training, collectives, control cells or drift
probes), over the multi-process strategies that run every layout on CPU (torch-ddp,
horovod-tf, mxnet-dist; torch-dp and mxnet-device skip every cell of more than one device
on CPU at plan time), and a matrix of models x batch sizes x devices per node x nodes x
networks x repeats chosen to multiply out to about N. The planner never skips a cell for
the machine's cores (only the launcher does, at run time: launch/checks.py), so every cell
it plans here stays planned whatever the machine; the ``cluster:`` section says the cells
are meant for 64-CPU SLURM nodes and is otherwise inert here, since no cell is launched.

Each result is one of the measured results in benchmarks/scale_templates/ (a 2-process
ResNet-18 64 px cell of each strategy on a 2-core CPU, from results/default of 2026-11-28)
with the cell, model, ranks and numbers replaced: its window times follow the throughput
law ``T(b) = b/v0 + t_c`` (v0 from the template's rate scaled by the model's FLOPs, t_c a
fixed cost plus a ring all-reduce of the gradient over the cell's link), times a seeded
log-normal factor per cell and a small one per rank and window, so the fits have something
to fit. Each result must validate against workflow/schemas/result.schema.yaml: a sample is
checked as they are written, and the aggregate rule's reader checks every one.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dpscale.launch.setup.envs import READY_MARKER, env_folder_name
from dpscale.plan.cell import Cell
from dpscale.plan.errors import ConfigError
from dpscale.plan.result import model_info, validate_result
from dpscale.registry import STRATEGIES
from dpscale.runner.timing import slowest_rank, throughput_measurement
from dpscale.study_check import check_study

TEMPLATES = Path(__file__).resolve().parent / "scale_templates"
STUDY_STRATEGIES = ("torch-ddp", "horovod-tf", "mxnet-dist")
DEVICES = (1, 2, 4, 8)
NODES = (1, 2, 4, 8, 16)
NETWORKS = (
    {"name": "1gbit", "rate": "1gbit"},
    {"name": "10gbit", "rate": "10gbit"},
    {"name": "100gbit", "rate": "100gbit"},
    {"name": "wan25gbit", "rate": "25gbit", "delay": "2ms"},
)
BATCHES = (8, 16, 32, 64, 128, 256, 512, 1024)
MODELS = (
    {"name": "resnet18", "stem": "imagenet", "image_size": 64, "classes": 10},
    {"name": "resnet50", "stem": "imagenet", "image_size": 224, "classes": 1000},
    {"name": "resnet18", "stem": "cifar", "image_size": 32, "classes": 10},
    {"name": "resnet101", "stem": "imagenet", "image_size": 224, "classes": 1000},
    {"name": "resnet50", "stem": "imagenet", "image_size": 64, "classes": 100},
    {"name": "resnet18", "stem": "imagenet", "image_size": 224, "classes": 1000},
)
CPUS_PER_NODE = 64
INTRA_NODE_BYTES_S = 4e9  # ranks on one node exchange through shared memory
INTRA_NODE_LATENCY_S = 20e-6
LINK_LATENCY_S = 50e-6
FIXED_STEP_S = 0.01
# how much more each strategy's exchange costs than torch-ddp's bucketed ring
EXCHANGE_FACTOR = {"torch-ddp": 0.6, "horovod-tf": 0.8, "mxnet-dist": 1.2}
VALIDATE_EVERY = 97  # every 97th result (and each strategy's first) checked against the schema


@dataclass(frozen=True)
class Matrix:
    """The study's dimensions; ``cells`` is what they multiply out to."""

    models: int
    batches: int
    devices: int
    nodes: int
    networks: int
    repeats: int

    @property
    def layouts(self) -> int:
        return self.devices * (1 + (self.nodes - 1) * self.networks)

    @property
    def cells(self) -> int:
        return len(STUDY_STRATEGIES) * self.models * self.batches * self.repeats * self.layouts

    def words(self) -> str:
        return (
            f"{len(STUDY_STRATEGIES)} strategies x {self.models} models x {self.batches} "
            f"batch sizes x {self.devices} devices per node x nodes {list(NODES[: self.nodes])} "
            f"(more than one: x {self.networks} networks) x {self.repeats} repeats"
        )


def matrix_for(target: int) -> Matrix:
    """The matrix closest to ``target`` cells: within 5% where one is, then the fewest
    repeats, the most of both devices per node and nodes, the most layouts and the nearest
    count. At least two batch sizes, so that
    every layout's throughput law has a line to fit."""
    best = None
    for models, batches, devices, nodes, networks, repeats in itertools.product(
        range(1, len(MODELS) + 1),
        range(2, len(BATCHES) + 1),
        range(1, len(DEVICES) + 1),
        range(1, len(NODES) + 1),
        range(1, len(NETWORKS) + 1),
        range(1, 6),
    ):
        if nodes == 1 and networks > 1:
            continue
        matrix = Matrix(models, batches, devices, nodes, networks, repeats)
        error = abs(matrix.cells - target) / target
        key = (error > 0.05, repeats, -min(devices, nodes), -matrix.layouts, error)
        if best is None or key < best[0]:
            best = (key, matrix)
    return best[1]


def study_config(name: str, matrix: Matrix, results_dir: Path, env_dir: Path) -> dict[str, Any]:
    config = {
        "study": name,
        "description": f"Scale benchmark: {matrix.cells} generated cells ({matrix.words()}).",
        "results_dir": str(results_dir),
        "env_dir": str(env_dir),
        "accelerator": "cpu",
        "strategies": list(STUDY_STRATEGIES),
        "models": [dict(model) for model in MODELS[: matrix.models]],
        "batch_sizes": list(BATCHES[: matrix.batches]),
        "devices_per_node": list(DEVICES[: matrix.devices]),
        "nodes": list(NODES[: matrix.nodes]),
        "modes": ["synthetic"],
        "controls": [],
        "measure": {
            "warmup_steps": 3,
            "windows": 5,
            "steps_per_window": 3,
            "repeats": matrix.repeats,
            "timeout_s": 900,
            "again": [],
        },
        # where such a study would run: SLURM nodes of 64 CPUs (inert without --profile slurm)
        "cluster": {"cpus_per_node": CPUS_PER_NODE, "mem_mb_per_device": 4000, "runtime_min": 30},
    }
    if matrix.nodes > 1:
        config["networks"] = [dict(network) for network in NETWORKS[: matrix.networks]]
    return config


def write_study(path: Path, config: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Generated by benchmarks/scale.py: every cell's result is generated, none measured.\n"
    )
    path.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def planned_cells(study: Path) -> tuple[dict[str, Any], list[Cell]]:
    """The checked config and its cells, as the workflow plans them."""
    try:
        checked = check_study([study], probe=False)
    except ConfigError as error:
        raise SystemExit(f"scale: {study}: {error}") from None
    return checked.config, checked.cells


def write_env_markers(config: dict[str, Any]) -> list[Path]:
    """Each study environment's ready marker (bench_cell's input), so Snakemake plans no
    build_env job and so no cell after it; ancient() in the rule keeps their times out."""
    markers = []
    for env in sorted({STRATEGIES[name].env for name in config["strategies"]}):
        marker = Path(config["env_dir"]) / env_folder_name(env) / READY_MARKER
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        markers.append(marker)
    return markers


def templates() -> dict[str, dict[str, Any]]:
    return {
        name: json.loads((TEMPLATES / f"{name}.json").read_text(encoding="utf-8"))
        for name in STUDY_STRATEGIES
    }


def link_bytes_s(rate: str | None) -> float:
    """Bytes per second of a rate such as ``10gbit``."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)bit", (rate or "").lower())
    if not match:
        return INTRA_NODE_BYTES_S
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]
    return float(match.group(1)) * scale / 8


def delay_s(delay: str | None) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(us|ms)", delay or "")
    if not match:
        return 0.0
    return float(match.group(1)) * (1e-6 if match.group(2) == "us" else 1e-3)


def step_seconds(cell: Cell, template: dict[str, Any], rng: random.Random) -> tuple[float, float]:
    """(step time, its compute part) by the throughput law, times a per-cell factor."""
    flops = model_info(cell.model, None, None)["train_flops_per_sample"]
    reference = template["model_info"]["train_flops_per_sample"]
    per_device = template["measurement"]["summary"]["img_s_per_device"]["mean"]
    v0 = 1.25 * per_device * reference / flops
    compute = cell.batch_per_device / v0
    world = cell.world_size
    exchange = 0.0
    if world > 1:
        gradient = 4 * model_info(cell.model, None, None)["trainable_params"]
        if cell.nodes > 1:
            bandwidth = link_bytes_s(cell.network.rate)
            latency = LINK_LATENCY_S + delay_s(cell.network.delay)
        else:
            bandwidth, latency = INTRA_NODE_BYTES_S, INTRA_NODE_LATENCY_S
        exchange = 2 * (world - 1) / world * gradient / bandwidth + 2 * (world - 1) * latency
        exchange *= EXCHANGE_FACTOR[cell.strategy]
    factor = rng.lognormvariate(0.0, 0.04)
    return (compute + FIXED_STEP_S + exchange) * factor, compute * factor


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


def result_for(
    cell: Cell, template: dict[str, Any], started: float, seed: int
) -> tuple[dict[str, Any], float]:
    """The cell's generated result, and when it finished (the next cell starts then)."""
    rng = random.Random(f"{seed}:{cell.cell_id}")
    step, compute = step_seconds(cell, template, rng)
    measure, world = cell.measure, cell.world_size
    per_rank = [
        [
            step * measure.steps_per_window * rng.lognormvariate(0.0, 0.015)
            for _ in range(measure.windows)
        ]
        for _ in range(world)
    ]
    windows = slowest_rank(per_rank)
    measurement = throughput_measurement(
        windows, measure.steps_per_window, cell.batch_per_device, world
    )
    old = template["measurement"]
    startup = copy.deepcopy(template["startup"])
    startup["launch_time"] = started
    startup["per_rank_s"] = [
        startup["per_rank_s"][r % len(startup["per_rank_s"])] for r in range(world)
    ]
    first_window = started + startup["to_first_window_s"]
    finished = first_window + sum(windows) + 1.0
    measurement.update(
        per_rank_window_seconds=per_rank,
        rank_param_checksums=[old["rank_param_checksums"][0]] * world,
        timed_span=[first_window, first_window + sum(windows)],
        warmup_steps=measure.warmup_steps,
    )
    if "bucket_timeline" in old:
        measurement["bucket_timeline"] = _bucket_timeline(cell, template, compute)
    system = copy.deepcopy(template["system"])
    system["cpus_usable"] = CPUS_PER_NODE
    system["rank_interpreters"] = [system["rank_interpreters"][0]] * world
    used = cell.devices_per_node * cell.threads_per_device
    system["contention"].update(
        cpus=CPUS_PER_NODE,
        cpus_used_by_cell=used,
        spare_cpus=CPUS_PER_NODE - used,
        oversubscribed=False,
        timed_span=measurement["timed_span"],
    )
    system["launcher"]["wall_s"] = round(finished - started + 1.5, 2)
    quality_reason = (
        f"other processes used 0.00 cores on average (peak 0.05) while the cell measured; "
        f"{CPUS_PER_NODE - used} of {CPUS_PER_NODE} CPUs were spare; steal 0.0%"
    )
    result = {
        "schema_version": template["schema_version"],
        "cell": cell.to_dict(),
        "status": "ok",
        "reason": None,
        "started_at": _iso(started),
        "finished_at": _iso(finished),
        "framework": template["framework"],
        "model_info": model_info(cell.model, None, None),
        "measurement": measurement,
        "training": None,
        "system": system,
        "log_tail": None,
        "startup": startup,
        "quality": "ok",
        "quality_reason": quality_reason,
    }
    return result, finished


def _bucket_timeline(cell: Cell, template: dict[str, Any], compute: float) -> dict[str, Any]:
    """torch-ddp's bucket timeline, its times scaled to the cell's compute and its bucket
    sizes to the model's gradient."""
    old = template["measurement"]["bucket_timeline"]
    old_compute = sum(old["forward_s"] + old["backward_s"] + old["optimizer_s"]) / old["steps"]
    scale = compute / old_compute
    params = model_info(cell.model, None, None)["trainable_params"]
    size = params / template["model_info"]["trainable_params"]
    timeline = copy.deepcopy(old)
    for key in ("forward_s", "backward_s", "optimizer_s"):
        timeline[key] = [value * scale for value in old[key]]
    for bucket in timeline["buckets"]:
        bucket["bytes"] = max(4, int(bucket["bytes"] * size))
        bucket["ready_s"] = [value * scale for value in bucket["ready_s"]]
    return timeline


def write_results(config: dict[str, Any], cells: list[Cell], seed: int = 0) -> tuple[int, int]:
    """A result for every planned cell where the workflow looks for it; (files, bytes)."""
    folder = Path(config["results_dir"]) / config["study"]
    shapes = templates()
    clock = dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp()
    checked: set[str] = set()
    written = size = 0
    for index, cell in enumerate(cells):
        if cell.skip_reason:
            raise SystemExit(f"scale: the study plans a skipped cell: {cell.cell_id}")
        result, clock = result_for(cell, shapes[cell.strategy], clock, seed)
        if cell.strategy not in checked or index % VALIDATE_EVERY == 0:
            validate_result(result)
            checked.add(cell.strategy)
        path = cell.result_path(folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(result, indent=2, sort_keys=True)
        path.write_text(text, encoding="utf-8")
        written += 1
        size += len(text)
    return written, size
