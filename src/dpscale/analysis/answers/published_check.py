"""Scale-out predicted for published multi-GPU results (studies/published/cases.yaml), and
the error against what was published: one row per case.

Each case is predicted by the bucket mechanism (published_model) from its typed fields
alone (published_setup; plan.published_cases checks them before any job). A case whose
published figure is a time to train with a ``reference`` is compared as the ratio of the
two times, each over its per-device batch phases; the case it names is the ratios'
reference, predicted with nothing to compare. Every other case compares its efficiency
against its baseline. The sentences that sum the table up: published_summary.

Each compared row also gives the link rate its published figure implies (implied_rate): the
rate at which the prediction would meet it, every other input held. A diagnostic of what the
nominal rate misses, never an input to a prediction.

Each link is its nominal rate priced through the case's traffic (laws.pricing.LinkPricing:
plan.traffic.seconds), not a CollectiveCurve (laws.cluster_link): no case published a
collectives log, and a curve's words speak of one. Every number here is an extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from dpscale.analysis.answers.cluster_prediction import KIND
from dpscale.analysis.answers.published_model import (
    Profile,
    Setup,
    choose_profile,
    efficiency,
    figure_at,
    implied_rate,
    train_time,
)
from dpscale.analysis.answers.published_setup import setup_for
from dpscale.plan.layout import nodes_words
from dpscale.plan.published_cases import SECONDARY, CaseFields, case_fields, references

REFERENCE_STATUS = "predicted, nothing published to compare (the ratios' reference)"
SECONDARY_STATUS = "predicted (published figure from secondary sources)"


def published_efficiency(case: Mapping[str, Any], img_s: float | None) -> tuple[float, str]:
    """The published figure as an efficiency (0-1), and how it was read; NaN where none."""
    published = case["published"]
    kind, value, n = published["kind"], published["value"], case["devices_total"]
    if kind == "scaling_efficiency":
        return value / 100, "published scaling efficiency"
    if kind == "speedup":
        return value / n, f"published speed-up {value:g} / {n} devices"
    if kind == "throughput" and img_s:
        return value / (n * img_s), f"published {value:g} img/s / ({n} x {img_s:g} img/s)"
    derived = case.get("derived") or {}
    if "efficiency_percent_vs_8gpu" in derived:
        return derived["efficiency_percent_vs_8gpu"] / 100, "derived in cases.yaml (secondary)"
    return math.nan, "no published efficiency"


def source_words(origin: Mapping[str, Any]) -> str:
    """Where the published figure is: its URL, and the repository file at its commit."""
    parts = [origin.get("url", "")]
    if origin.get("repository") and origin.get("commit"):
        path = str(origin.get("path", "")).split(" ")[0]
        parts.append(f"{origin['repository']}:{path}@{str(origin['commit'])[:12]}")
    return " ".join(part for part in parts if part)


def basis(setup: Setup | str) -> str:
    """What a row's predicted number rests on, in words that say it is extrapolated."""
    if isinstance(setup, str):
        return "not predicted"
    throughput = "" if setup.own_img_s else " and one-device img/s"
    return f"{KIND}: borrowed compute profile{throughput}, nominal link"


def _efficiency_metric(setup: Setup) -> str:
    base = "1 GPU" if setup.base_world == 1 else f"one node of {setup.base_world}"
    return f"efficiency vs {setup.world // setup.base_world} x {base} (batch {setup.batch})"


def _phases_words(phases: Sequence[tuple[float, int]]) -> str:
    """'30 epochs at b64, 60 at b128'."""
    return ", ".join(
        f"{epochs:g}{' epochs' if index == 0 else ''} at b{batch}"
        for index, (epochs, batch) in enumerate(phases)
    )


def check(cases: Sequence[Mapping[str, Any]], profiles: Sequence[Profile]) -> pd.DataFrame:
    """One row per case: predicted and published, the error, what the prediction rests on
    (``basis``) and every assumption; each case borrows its profile (choose_profile)."""
    by_id = {case["id"]: case for case in cases}
    fields = {case["id"]: case_fields(case) for case in cases}
    chosen = {
        case["id"]: choose_profile(profiles, case["model"], fields[case["id"]].compute_precision)
        for case in cases
    }
    setups = {case["id"]: setup_for(case, by_id, chosen[case["id"]]) for case in cases}
    referenced = references(cases)
    rows = []
    for case in cases:
        setup = setups[case["id"]]
        row: dict[str, Any] = {
            "id": case["id"],
            "model": case["model"],
            "devices": (
                f"{case['devices_total']} {case['gpu']} "
                f"({case['devices_per_node']} per node, {nodes_words(case['nodes'])})"
            ),
            "link": case["inter_node_link"]["name"],
            "metric": "",
            "predicted": math.nan,
            "published": math.nan,
            "error_points": math.nan,
            "error_pct": math.nan,
            "implied_gbit_s": math.nan,
            "implied_pct_of_nominal": math.nan,
            "link_kind": "",
            "kind": KIND,
            "basis": basis(setup),
            "compute_source": "",
            "assumptions": "; ".join(str(a) for a in case.get("assumptions", [])),
            "status": "not predicted",
            "reason": "",
            "source": source_words(case["source"]),
        }
        if isinstance(setup, str):
            row["reason"] = setup
            rows.append(row)
            continue
        own = " | ".join(setup.assumptions)
        row.update(
            link=setup.link,
            compute_source=setup.compute_source,
            assumptions=own + " || case: " + row["assumptions"],
            status="predicted",
            link_kind=setup.link_kind,
        )
        timeline = chosen[case["id"]].timeline
        row.update(_compared(case, fields[case["id"]], setup, timeline, by_id, setups, referenced))
        rows.append(row)
    return pd.DataFrame(rows)


def _compared(
    case: Mapping[str, Any],
    fields: CaseFields,
    setup: Setup,
    timeline: Any,
    by_id: Mapping[str, Mapping[str, Any]],
    setups: Mapping[str, Setup | str],
    referenced: set[str],
) -> dict[str, Any]:
    """A predicted row's figures: a time ratio over its reference, the ratios' reference
    alone, or an efficiency against its baseline."""
    secondary = {"status": SECONDARY_STATUS} if fields.confidence == SECONDARY else {}
    reference = setups.get(fields.reference or "")
    if fields.reference is None and case["id"] in referenced:
        return {
            "metric": _efficiency_metric(setup),
            "predicted": 100 * efficiency(timeline, setup),
            "status": REFERENCE_STATUS,
        }
    if fields.reference is not None and isinstance(reference, Setup):
        ratio = train_time(timeline, setup) / train_time(timeline, reference)
        published = case["published"]["value"] / by_id[fields.reference]["published"]["value"]
        return {
            "metric": f"time ratio over {reference.link} ({_phases_words(setup.phases)})",
            "predicted": ratio,
            "published": published,
            "error_pct": 100 * (ratio - published) / published,
            **_implied(figure_at(timeline, setup, reference), published, setup.beta),
            **secondary,
        }
    if fields.reference is not None:
        return {
            "metric": _efficiency_metric(setup),
            "predicted": 100 * efficiency(timeline, setup),
            "status": f"predicted, nothing to compare (reference {fields.reference} not predicted)",
        }
    img_s = (case.get("single_device") or {}).get("img_s")
    published, how = published_efficiency(case, img_s)
    predicted = efficiency(timeline, setup)
    return {
        "metric": f"scaling efficiency % ({how})",
        "predicted": 100 * predicted,
        "published": 100 * published,
        "error_points": 100 * (predicted - published),
        **_implied(figure_at(timeline, setup), published, setup.beta),
        **secondary,
    }


def _implied(predict: Callable[[float], float], target: float, nominal: float) -> dict:
    """A row's implied link rate in Gbit/s and as a percent of its nominal rate."""
    rate = implied_rate(predict, target, nominal)
    return {"implied_gbit_s": rate * 8 / 1e9, "implied_pct_of_nominal": 100 * rate / nominal}
