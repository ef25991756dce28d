"""A study's one-device results and a cluster file -> the cluster's predicted scaling
(analysis.answers.cluster_prediction). Run by ``dpscale predict`` and, for the config's
``clusters``, by rule cluster_predictions: one function answers both."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import calibrated_prediction, term_prediction
from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.laws import calibrated as cal
from dpscale.analysis.laws.cluster_link import CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import timelines
from dpscale.analysis.results.import_logs import parse_all_reduce, read_lines
from dpscale.plan.cell import ModelConfig
from dpscale.plan.cluster_file import ClusterFile, read_cluster
from dpscale.plan.columns import POINT
from dpscale.plan.errors import ConfigError
from dpscale.plan.link import Link
from dpscale.plan.published import PROFILE_COLUMNS
from dpscale.plan.traffic import Traffic
from dpscale.plan.user_files import Unreadable
from dpscale.registry import STRATEGIES
from dpscale.render.html import table_with_lines
from dpscale.steps.io import read_given, read_optional, write, write_lines
from dpscale.steps.predict_words import (
    carried_sentence,
    device_mismatch,
    inter_words,
    intra_words,
    lead_sentence,
    profile_words,
    shown,
    upper_bound_sentence,
)
from dpscale.steps.published import published_bands, series_record

Files = Mapping[str, Any]


class NotPredicted(Exception):
    """Why these results cannot predict the cluster: one line ``<field>: <why>``."""


@dataclass(frozen=True)
class Answer:
    """One cluster's prediction and what it stands on."""

    key: tuple[str, str]  # (strategy, model)
    device: cp.OneDevice
    curve: CollectiveCurve | None  # None: a nominal link priced the inter-node collectives
    table: pd.DataFrame


# what the prediction reads of a study's tables (one_device, gradient_bytes, timelines)
CELLS_COLUMNS = (
    "strategy",
    "model",
    "world_size",
    "batch_per_device",
    "status",
    "comm",
    "img_s_mean",
    "img_s_ci95",
)


def _table(path: Path, what: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """A study's table the command names by its folder: read within plan.user_files' bound,
    as UTF-8, with the columns the prediction reads; else one line."""
    if not path.is_file():
        raise SystemExit(
            f"dpscale: predict: {path.parent.parent} has no tables/{path.name} ({what}); give "
            "a study's results folder (results/<study>) after its analysis ran"
        )
    try:
        return read_given(path, columns)
    except Unreadable as error:
        raise SystemExit(
            f"dpscale: predict: {path} {error}; allowed: {what} as dpscale's analysis wrote it"
        ) from None


def _depth(model_id: str) -> str:
    """The config's model name (``resnet50``) of a results' model id; the id itself where it
    is not one dpscale writes (results from elsewhere)."""
    try:
        return ModelConfig.from_key(model_id).name
    except ValueError:
        return model_id


def _model(named: str, found: dict) -> str:
    """The results' model id the cluster file names: the id as the results write it
    (``resnet50-imagenet224-c1000``), or a model name as the config takes it (``resnet50``)
    where the results time one model of that name."""
    ids = sorted({model for _, model in found})
    if named in ids:
        return named
    matching = [model_id for model_id in ids if _depth(model_id) == named]
    if len(matching) == 1:
        return matching[0]
    if matching:
        raise NotPredicted(
            f"model: {named} names {len(matching)} models in the results "
            f"({', '.join(matching)}); name one of them"
        )
    names = sorted({_depth(model_id) for model_id in ids})
    unambiguous = [name for name in names if [_depth(m) for m in ids].count(name) == 1]
    allowed = sorted({*unambiguous, *ids}) or "none (the results time no model)"
    raise NotPredicted(f"model: {named!r} is not a model the results time; allowed: {allowed}")


def _strategy(named: str | None, model: str, found: dict) -> str:
    """The cluster file's strategy, or the only one the results timed ``model`` with."""
    if named is not None:
        return named
    timed = sorted(strategy for strategy, timed_model in found if timed_model == model)
    if len(timed) != 1:
        raise NotPredicted(
            f"strategy: the results time {model} with {timed or 'no strategy'}; name one of them"
        )
    return timed[0]


def _curve(log_path: Path, ranks: int, rate: Link | None, field: str) -> CollectiveCurve:
    """A log (``field``: inter_node or intra_node) as a collective curve; a log of other
    ranks names ``<field>.ranks``, another fault ``<field>.nccl_tests_log``."""
    try:
        log = parse_all_reduce(read_lines(log_path), ranks)
        return CollectiveCurve.from_log(log, ranks, rate)
    except ValueError as error:  # LogError too
        if "ranks" not in str(error):  # the file itself: its size, encoding or a row
            raise NotPredicted(f"{field}.nccl_tests_log: {log_path.name} {error}") from None
        raise NotPredicted(
            f"{field}.ranks: {log_path.name} {error} ({field}.ranks is {ranks}: the ranks the "
            "log ran at)"
        ) from None


def _inter_curve(cluster: ClusterFile) -> CollectiveCurve | None:
    """The inter-node log as a curve; None where the cluster gives a nominal link."""
    if cluster.nominal:
        return None
    return _curve(cluster.log, cluster.ranks, cluster.rate, "inter_node")


def _shape(cluster: ClusterFile, curve: CollectiveCurve | None) -> cp.Cluster:
    """The cluster as the prediction takes it, with its intra-node curve where given and
    its nominal link where it gives no inter-node log."""
    intra, intra_log, intra_nominal = None, "", None
    if cluster.intra is not None and cluster.intra.nominal:
        intra_nominal = cluster.intra.rate
    elif cluster.intra is not None:
        intra = _curve(cluster.intra.log, cluster.intra.ranks, cluster.intra.rate, "intra_node")
        intra_log = cluster.intra.log.name
    nominal = cluster.rate if cluster.nominal else None
    return cp.Cluster(
        cluster.name,
        curve,
        cluster.devices_per_node,
        cluster.nodes,
        intra,
        intra_log,
        nominal,
        intra_nominal,
    )


def declared_traffic(strategy: str) -> Traffic:
    """What the strategy declares one step sends (its adapter's ``traffic``); a strategy
    dpscale does not declare (results from elsewhere) is taken as the log measured it, a
    ring all-reduce. A log measured an all-reduce, so a declared traffic of another kind is
    refused by the prediction (laws.pricing.CurvePricing), never priced as a ring."""
    declared = STRATEGIES.get(strategy)
    return cp.RING if declared is None else declared.declared_traffic()


def answer(
    cells: pd.DataFrame,
    buckets: pd.DataFrame,
    cluster: ClusterFile,
    where: str,
    other_device: bool = False,
) -> Answer:
    """The cluster predicted from a study's cells.csv and bucket_timeline.csv (what
    ``dpscale predict`` and rule cluster_predictions both run); NotPredicted says why not,
    also where the cluster file names a device the one-device profile is not (unless
    ``other_device``: then every row says so)."""
    found = timelines(buckets)
    model = _model(cluster.model, found)
    key = (_strategy(cluster.strategy, model, found), model)
    if key not in found:
        have = sorted(" ".join(k) for k in found) or "none"
        raise NotPredicted(
            f"model: no bucket timeline of {key[0]} {model} in {where}; it has {have}"
        )
    if cells.empty:
        raise NotPredicted("batch_per_device: the results have no one-device cell")
    curve = _inter_curve(cluster)
    shape = _shape(cluster, curve)
    try:
        device = cp.one_device(cells, *key, cluster.batch_per_device)
        total, source = cp.gradient_bytes(buckets, *key, cells)
        table = cp.predict(found[key], device, shape, total, source, declared_traffic(key[0]))
    except ValueError as error:
        raise NotPredicted(str(error)) from None
    mismatch = device_mismatch(cluster, device)
    if mismatch and not other_device:
        raise NotPredicted(
            f"{mismatch}; measure one device of the cluster's kind (or give --other-device "
            "to predict from this profile anyway, every row labelled)"
        )
    table = table.assign(
        profile_device=device.device,
        profile_host=device.host,
        profile_other_device=mismatch or "",
    )
    return Answer(key, device, curve, table)


def _small_run_named(calibrate, network: str | None, mode: str | None) -> None:
    """--network and --mode name the small run's cells: only with --calibrate, and a mode
    one of those a small run calibrates on; one line otherwise."""
    for option, value in (("--network", network), ("--mode", mode)):
        if value is not None and calibrate is None:
            raise SystemExit(
                f"dpscale: predict: {option} names the small run's cells; give --calibrate"
            )
    try:
        calibrated_prediction.check_mode(mode)
    except ValueError as error:
        raise SystemExit(f"dpscale: predict: --{error}") from None


def predict(
    results: str | Path,
    cluster_path: str | Path,
    out: str | Path | None,
    calibrate: str | Path | None = None,
    network: str | None = None,
    mode: str | None = None,
    other_device: bool = False,
) -> str:
    """The printed answer; the CSV written to ``out`` where given. ``calibrate``: a small
    run's results on the same cluster, ``network`` and ``mode`` its network and its cells'
    mode (synthetic or folder) to calibrate on, where it measured several."""
    where = str(cluster_path)
    _small_run_named(calibrate, network, mode)
    try:
        cluster = read_cluster(cluster_path)
    except ConfigError as error:
        raise SystemExit(f"dpscale: {error}") from None
    tables = Path(results) / "tables"
    cells = _table(tables / "cells.csv", "the one-device cells", CELLS_COLUMNS)
    buckets = _table(
        tables / "bucket_timeline.csv", "the one-rank bucket timeline", PROFILE_COLUMNS
    )
    try:
        found = answer(cells, buckets, cluster, str(tables), other_device)
        small = {"network": network, "mode": mode}
        table = carried(found, cells, buckets, cluster, calibrate, small)
    except NotPredicted as error:
        raise SystemExit(f"dpscale: {where}: {error}") from None
    device = found.device
    if out:
        write(table, out)
    text = [
        lead_sentence(table),
        f"{cluster.name}: {found.key[0]} {found.key[1]}; one-device profile: "
        f"{profile_words(device, cluster)}, step {device.step_s * 1e3:.1f} ms "
        f"({device.lo * 1e3:.1f}-{device.hi * 1e3:.1f}) at batch {device.batch}; "
        f"{inter_words(cluster, found.curve)}{intra_words(cluster)}",
        shown(table),
        *filter(
            None,
            [
                upper_bound_sentence(table),
                carried_sentence(table),
                term_prediction.sentence(table, calibrate is not None),
            ],
        ),
    ]
    if out:
        text.append(f"dpscale: wrote {out}")
    return "\n".join(text)


# -- rule cluster_predictions: the config's clusters ----------------------------------------


def _predicted(
    cells: pd.DataFrame, buckets: pd.DataFrame, path: str, where: str
) -> tuple[pd.DataFrame | None, str]:
    """One cluster file's table (None where not predicted) and its landing sentence."""
    cluster = read_cluster(path)  # checked at plan time (plan.cluster_file.check_clusters)
    try:
        found = answer(cells, buckets, cluster, where)
    except NotPredicted as error:
        return None, cp.why_not(cluster.name, path, str(error))
    table = carried(found, cells, buckets, cluster, None, {}, where)
    return table, _landing_words(table, found)


def _landing_words(table: pd.DataFrame, found: Answer) -> str:
    """A cluster's landing sentence: the range first (as ``dpscale predict``'s first line),
    then the link-only sentence as its upper bound, and the one-device profile it stands on."""
    strategy, model = found.key
    upper = upper_bound_sentence(table)
    return " ".join(
        filter(
            None,
            [
                lead_sentence(table),
                upper,
                f"One device: this study's {strategy} {model} cells ({found.device.words()}).",
            ],
        )
    )


def own_terms(found: Answer, cells, buckets, cluster: ClusterFile, where: str) -> pd.DataFrame:
    """The table with the study's own control cells, where they split a layout of the
    cluster's kind, carried term by term to its rows (the study is then the small run)."""
    wanted = calibrated_prediction.SmallRun(
        found.key, cluster.batch_per_device, cluster.devices_per_node
    )
    link_only_at = _link_only(cells, buckets, cluster, where)
    return term_prediction.carried(
        found.table, cells, wanted, link_only_at, cluster.one_host, "synthetic"
    )


def _link_only(cells, buckets, cluster: ClusterFile, where: str):
    """The link-only prediction of ``cluster`` at one node count, or why there is none."""

    def at(nodes: int) -> pd.DataFrame | str:
        try:
            return answer(cells, buckets, replace(cluster, nodes=(nodes,)), where).table
        except NotPredicted as error:
            return str(error)

    return at


def cluster_predictions(inputs: Files, outputs: Files, params: Files) -> str:
    """cells + bucket timeline + the config's cluster files -> every cluster predicted
    (extrapolated) in one table, a sentence each for the landing page, and the page."""
    cells, buckets = read_optional(inputs["cells"]), read_optional(inputs["timeline"])
    tables, lines = [], []
    for path in json.loads(params["clusters"]):
        table, line = _predicted(cells, buckets, str(path), "this study")
        lines.append(line)
        if table is not None:
            tables.append(table)
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=cp.COLUMNS)
    write(table, outputs["table"])
    write_lines(lines, outputs["top"])
    title = f"Your clusters, predicted ({cp.KIND})"
    Path(outputs["html"]).write_text(table_with_lines(table, title, lines), encoding="utf-8")
    return f"[dpscale] clusters: {' '.join(lines)}"


# -- what a small run on the cluster, or the published cases, carry on ----------------------

# what the calibration reads of a small run's cells (its scaling table in one mode)
SMALL_RUN_COLUMNS = (*POINT, "status", "img_s_mean", "img_s_ci95")


def calibrated(
    found: Answer, cells, buckets, cluster: ClusterFile, path: Path, small: dict[str, Any]
) -> pd.DataFrame:
    """The prediction's table with the columns the small run's points calibrate, in the one
    mode its cells were measured in (``small``: its network and mode where named)."""
    wanted = calibrated_prediction.SmallRun(
        found.key, cluster.batch_per_device, cluster.devices_per_node, **small
    )
    run_cells = _table(path / "tables" / "cells.csv", "the small run's cells", SMALL_RUN_COLUMNS)
    try:
        measured = calibrated_prediction.small_run_rows(run_cells, wanted, str(path))
    except ValueError as error:
        raise NotPredicted(str(error)) from None
    at = replace(cluster, nodes=tuple(sorted(set(int(n) for n in measured["nodes"]))))
    link_only = answer(cells, buckets, at, str(path)).table
    fit_points = calibrated_prediction.points(measured, link_only)
    if not fit_points:
        raise NotPredicted(
            f"calibrate: no measured point of {path} has a link-only prediction to calibrate"
        )
    mode = str(measured["mode"].iloc[0])
    stragglers = calibrated_prediction.one_device_spread(run_cells, wanted, mode)
    fit = cal.calibrate(fit_points, *(stragglers or ()))
    largest = calibrated_prediction.largest_world(fit_points)
    table = calibrated_prediction.with_calibration(found.table, fit, largest, mode)
    table = calibrated_prediction.with_baselines(table, fit_points, series_record())
    # beside it, the small run's loss carried term by term where its controls split it
    return term_prediction.carried(
        table, run_cells, wanted, lambda nodes: link_only, cluster.one_host, mode
    )


def carried(
    found: Answer, cells, buckets, cluster: ClusterFile, path, small, where: str = ""
) -> pd.DataFrame:
    """Calibrated on the small run where one is given; else with the published band, and
    the results' own control cells carried term by term where they split a layout."""
    if path is not None:
        return calibrated(found, cells, buckets, cluster, Path(path), small)
    table = own_terms(found, cells, buckets, cluster, where or "the results")
    return calibrated_prediction.with_scale_bands(table, published_bands())
