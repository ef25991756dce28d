"""A study's one-device results and a cluster file -> the cluster's predicted scaling
(analysis.answers.cluster_prediction). Run by ``dpscale predict``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.laws.cluster_link import CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import timelines
from dpscale.analysis.results.import_logs import LogError, parse_all_reduce, read_lines
from dpscale.plan.cluster_file import read_cluster
from dpscale.plan.errors import ConfigError
from dpscale.steps.io import read, write


def _table(path: Path, what: str) -> pd.DataFrame:
    if not path.is_file():
        raise SystemExit(
            f"dpscale: predict: {path.parent.parent} has no tables/{path.name} ({what}); give "
            "a study's results folder (results/<study>) after its analysis ran"
        )
    return read(path)


def shown(table: pd.DataFrame) -> str:
    """The printed table: each number with its range."""
    lines = []
    for _, row in table.iterrows():
        lines.append(
            f"{row['nodes']:>5} nodes {row['world_size']:>6} devices  "
            f"step {row['step_time_s'] * 1e3:.1f} ms "
            f"({row['step_time_lo_s'] * 1e3:.1f}-{row['step_time_hi_s'] * 1e3:.1f})  "
            f"{row['img_s']:.0f} img/s  speedup {row['speedup']:.2f}x "
            f"({row['speedup_lo']:.2f}-{row['speedup_hi']:.2f})  "
            f"efficiency {100 * row['efficiency']:.0f}%  "
            f"compress {row['compression_for_90pct']:.3g}x for 90%  [{row['kind']}]"
        )
    return "\n".join(lines)


def _strategy(named: str | None, model: str, found: dict, where: str) -> str:
    """The cluster file's strategy, or the only one the results timed ``model`` with."""
    if named is not None:
        return named
    timed = sorted(strategy for strategy, timed_model in found if timed_model == model)
    if len(timed) != 1:
        raise SystemExit(
            f"dpscale: {where}: strategy: the results time {model} with "
            f"{timed or 'no strategy'}; name one of them"
        )
    return timed[0]


def predict(results: str | Path, cluster_path: str | Path, out: str | Path | None) -> str:
    """The printed answer; the CSV written to ``out`` where given."""
    where = str(cluster_path)
    try:
        cluster = read_cluster(cluster_path)
    except ConfigError as error:
        raise SystemExit(f"dpscale: {error}") from None
    tables = Path(results) / "tables"
    cells = _table(tables / "cells.csv", "the one-device cells")
    buckets = _table(tables / "bucket_timeline.csv", "the one-rank bucket timeline")
    found = timelines(buckets)
    key = (_strategy(cluster.strategy, cluster.model, found, where), cluster.model)
    if key not in found:
        raise SystemExit(
            f"dpscale: {where}: model: no bucket timeline of {key[0]} "
            f"{cluster.model} in {tables}; it has {sorted(' '.join(k) for k in found) or 'none'}"
        )
    try:
        log = parse_all_reduce(read_lines(cluster.log), cluster.ranks)
    except LogError as error:
        field = "inter_node.ranks" if "ranks" in str(error) else "inter_node.nccl_tests_log"
        raise SystemExit(
            f"dpscale: {where}: {field}: {cluster.log.name} {error} (inter_node.ranks is "
            f"{cluster.ranks}: the ranks the log ran at)"
        ) from None
    try:
        curve = CollectiveCurve.from_log(log, cluster.ranks, cluster.rate)
        device = cp.one_device(cells, *key, cluster.batch_per_device)
        total, source = cp.gradient_bytes(buckets, *key, cells)
        table = cp.predict(
            found[key],
            device,
            cp.Cluster(cluster.name, curve, cluster.devices_per_node, cluster.nodes),
            total,
            source,
        )
    except ValueError as error:
        raise SystemExit(f"dpscale: {where}: {error}") from None
    if out:
        write(table, out)
    text = [
        f"{cluster.name}: {key[0]} {cluster.model}, one-device step "
        f"{device.step_s * 1e3:.1f} ms ({device.lo * 1e3:.1f}-{device.hi * 1e3:.1f}) at "
        f"batch {device.batch}; inter-node log {cluster.log.name} at {cluster.ranks} ranks; "
        f"{curve.algorithm}",
        shown(table),
        cp.sentence(table),
    ]
    if out:
        text.append(f"dpscale: wrote {out}")
    return "\n".join(text)
