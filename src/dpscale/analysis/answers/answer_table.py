"""The landing page's answer table: one row per layout the findings have (and the one device
an answer may choose), every number with its 95% interval, read from the tables the findings
already read (findings rows, cost.csv, cells.csv). The img/s the choice is made by is a
column of its own; layouts the study could not run at all are named once, below the table
(``below_table``), not a row each.

Words the cells share: intervals that overlap are a *tie*; a value whose 95% interval is
wider than the value itself allows (half-width over ``UNRESOLVED_FRACTION`` of it, or no bound
at all) is *unresolved*, its number still shown; a missing one is *not measured*.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.analysis.answers.answer import TIE_RULE, _pick, _tied
from dpscale.analysis.answers.cost import Prices, money
from dpscale.analysis.answers.findings import matching_rows, with_network
from dpscale.analysis.answers.kernels import kernels_line
from dpscale.analysis.answers.verdicts import NOT_MEASURED, UNRESOLVED_FRACTION
from dpscale.analysis.laws.accuracy import resolved
from dpscale.analysis.laws.words import is_known
from dpscale.plan.cell import MODEL_KEY
from dpscale.plan.columns import LAYOUT
from dpscale.plan.layout import Layout, plural

IMG_S = "img/s, what the choice ranks (95% CI)"
COLUMNS = [
    "answer",
    "layout",
    IMG_S,
    "speedup vs 1 device (95% CI)",
    "beats 1 device from global batch (95% CI)",
    "cost per 1,000 images (95% CI)",
    "accuracy cost vs 1 device (95% CI)",
    "quality",
]
UNRESOLVED = "unresolved"
CHOOSE, TIE, SLOWER = "choose", "tie (img/s intervals overlap)", "slower than the choice"
ACCURACY_ONLY = "accuracy only"
CHOSEN_BY_RULE = f"{CHOOSE} (tie rule)"
ORDER = [CHOOSE, CHOSEN_BY_RULE, TIE, SLOWER, UNRESOLVED, "", ACCURACY_ONLY]
# why the choice can differ from the largest speed-up: the line under the table
CHOICE_RULE = (
    "The choice is the layout with the most img/s at the largest per-device batch; layouts "
    f"whose intervals overlap tie, and the tie rule picks: {TIE_RULE}. A speed-up is over "
    "its own strategy's one device, and those one-device baselines differ, so a larger "
    "speed-up can still mean fewer img/s."
)


def short_model(key: str) -> str:
    """``resnet18-imagenet64-c10`` -> ``ResNet-18 64 px``; a zoo model keeps its name:
    ``torchvision.mobilenet_v3_small 64 px``."""
    match = MODEL_KEY.fullmatch(str(key))
    if not match:
        return str(key)
    name = f"ResNet-{match['depth']}" if match["depth"] else match["name"]
    return f"{name} {match['image_size']} px"


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def interval_words(value: float, half: float, unit: str = "", digits: int = 3) -> str:
    """ "1.76x [1.69, 1.83]"; "1.8x (no interval)"; "unresolved: 1.3x [0.4, 2.2]" where the
    interval is too wide to tell; "not measured" without a value."""
    if not is_known(value):
        return NOT_MEASURED
    shown = f"{_number(value, digits)}{unit}"
    if not is_known(half):
        return f"{shown} (no interval)"
    if math.isinf(half):
        return f"{UNRESOLVED}: {shown}, interval unbounded"
    low, high = _number(value - half, digits), _number(value + half, digits)
    text = f"{shown} [{low}, {high}]"
    too_wide = abs(half) > UNRESOLVED_FRACTION * abs(value)
    return f"{UNRESOLVED}: {text}" if too_wide else text


def break_even_words(even: float, half: float) -> str:
    """The global batch from which a layout beats one device: "any batch", "never",
    "10 [8, 11]" (whole batches: the interval widened to them), or unresolved."""
    if not is_known(even):
        return NOT_MEASURED
    if math.isinf(even):
        return "never (fitted laws)"
    if even <= 0:
        return "any batch"
    shown = str(max(math.ceil(even), 1))
    if not is_known(half):
        return f"{shown} (no interval)"
    if math.isinf(half):
        return f"{UNRESOLVED}: {shown}, interval unbounded"
    text = f"{shown} [{max(math.floor(even - half), 0)}, {math.ceil(even + half)}]"
    return f"{UNRESOLVED}: {text}" if half > UNRESOLVED_FRACTION * even else text


def cost_words(row: dict[str, Any] | None, prices: Prices | None) -> str:
    """Per 1,000 images at the layout's largest batch, its interval from img/s's (the cost
    is inverse to img/s); node-hours without a price."""
    if not row or not is_known(row.get("node_hours_per_1000_images")):
        return NOT_MEASURED
    img_s, half = row["img_s"], row.get("img_s_ci95", math.nan)
    priced = prices is not None and is_known(row.get("cost_per_1000_images"))
    value = row["cost_per_1000_images"] if priced else row["node_hours_per_1000_images"]

    def shown(*values: float) -> list[str]:
        return [money(x, prices) if priced else f"{x:.3g}" for x in values]

    unit = "" if priced else " node-h"
    if not is_known(half):
        return f"{shown(value)[0]}{unit} (no interval)"
    if img_s - half <= 0:
        return f"{UNRESOLVED}: {shown(value)[0]}{unit}, interval unbounded"
    middle, low, high = shown(value, value * img_s / (img_s + half), value * img_s / (img_s - half))
    text = f"{middle} [{low}, {high}]{unit}"
    return f"{UNRESOLVED}: {text}" if half > UNRESOLVED_FRACTION * img_s else text


def img_s_words(row: dict[str, Any] | None) -> str:
    """The layout's img/s at the batch the choice compares, with its interval: "148 [140,
    156] at batch 32"."""
    if not row or not is_known(row.get("img_s")):
        return NOT_MEASURED
    text = interval_words(row["img_s"], row.get("img_s_ci95", math.nan))
    return f"{text} at batch {int(row['batch_per_device'])}"


def _rules(finding: dict[str, Any]) -> list[str]:
    prefix = "accuracy_delta_"
    return sorted(
        key.removeprefix(prefix)
        for key, value in finding.items()
        if key.startswith(prefix) and not key.endswith("_ci95") and is_known(value)
    )


def delta_cell(points: float, half: float) -> str:
    """An accuracy delta in points: "-2.6 pts [-3.4, -1.9]", a tie with one device where the
    interval holds 0, unresolved where it is too wide to tell (accuracy.RESOLVED_HALF)."""
    if not is_known(half):
        return f"{points:+.1f} pts (no interval)"
    if not resolved(half / 100):
        return f"{UNRESOLVED}: {points:+.1f} ± {half:.1f} pts"
    if points - half <= 0 <= points + half:
        return f"tie with 1 device: {points:+.1f} ± {half:.1f} pts"
    return f"{points:+.1f} pts [{points - half:+.1f}, {points + half:+.1f}]"


def accuracy_words(row: dict[str, Any], findings: pd.DataFrame) -> str:
    """Per learning-rate rule, the layout's accuracy delta; else the same strategy's on as
    many devices training another model (named); else not measured."""
    own = _finding(findings, row)
    candidates = [own] if own else []
    others = matching_rows(findings, row, ["strategy", "world_size"])
    candidates += [r for r in others.to_dict("records") if not _same(r, row)]
    for finding in candidates:
        rules = _rules(finding)
        if not rules:
            continue
        words = "; ".join(
            f"lr {rule}: "
            + delta_cell(
                100 * finding[f"accuracy_delta_{rule}"],
                100 * finding.get(f"accuracy_delta_{rule}_ci95", math.nan),
            )
            for rule in rules
        )
        if finding is own:
            return words
        return f"{words} (trained: {short_model(finding['model'])})"
    return NOT_MEASURED


def quality_words(cells: pd.DataFrame, row: dict[str, Any], finding: dict[str, Any] | None) -> str:
    """How the layout's cells went: "3 of 3 cells ok", "2 ok, 1 noisy of 3 cells", or why
    none was measured."""
    mine = matching_rows(cells, row, LAYOUT)
    if mine.empty:
        return NOT_MEASURED
    measured = mine[mine["status"] == "ok"]
    if measured.empty:
        reason = (finding or {}).get("verdict") or ""
        reason = str(reason).removeprefix(f"{NOT_MEASURED}: ").split(";")[0]
        return f"0 of {plural(len(mine), 'cell')} ran: {reason}" if reason else NOT_MEASURED
    counts = measured["quality"].astype("string").fillna("unknown").value_counts()
    if counts.get("ok", 0) == len(mine):
        return f"{counts['ok']} of {plural(len(mine), 'cell')} ok"
    parts = [f"{n} {q}" for q, n in counts.items()]
    failed = len(mine) - len(measured)
    parts += [f"{failed} not ok"] if failed else []
    return f"{', '.join(parts)} of {plural(len(mine), 'cell')}"


def _finding(findings: pd.DataFrame, row: dict[str, Any]) -> dict[str, Any] | None:
    mine = matching_rows(findings, row, LAYOUT)
    return mine.iloc[0].to_dict() if not mine.empty else None


def _cannot_run(cells: pd.DataFrame, row: dict[str, Any]) -> str | None:
    """Why none of the layout's cells could run (every one skipped at plan time: its
    reason); None where one ran or failed."""
    mine = matching_rows(cells, row, LAYOUT)
    if mine.empty or not (mine["status"] == "skipped").all():
        return None
    reasons = mine["reason"].dropna().astype(str) if "reason" in mine else pd.Series([])
    return reasons.iloc[0].strip() if len(reasons) else "skipped at plan time"


def _names(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def left_out_line(left_out: list[tuple[str, str, str]]) -> str | None:
    """One sentence naming the layouts the study could not run, grouped by why:
    (strategy, where, reason) each; a reason that opens with its strategy's name ("torch-dp
    drives ...") is said once for all the strategies it names ("each drives ...")."""
    if not left_out:
        return None
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for strategy, where, reason in left_out:
        by_reason.setdefault(reason.replace(f"{strategy} ", "\0 ", 1), []).append((strategy, where))
    parts = []
    for reason, layouts in by_reason.items():
        strategies = sorted({strategy for strategy, _ in layouts})
        places = _names(sorted({where for _, where in layouts}))
        who = "each" if len(strategies) > 1 else "it"
        why = reason.replace("\0", who, 1) if reason.startswith("\0") else f"({reason})"
        parts.append(f"{_names(strategies)} on {places}: {why}")
    return "Not in the table, as the study cannot run them: " + "; ".join(parts) + "."


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(str(a[key]) == str(b[key]) for key in LAYOUT)


def _layout_cell(row: dict[str, Any]) -> str:
    where = Layout(int(row["nodes"]), int(row["devices_per_node"])).words(row["network"])
    return f"{row['strategy']}, {where} ({short_model(row['model'])})"


def _cost_row(costs: pd.DataFrame, row: dict[str, Any], batch: float) -> dict[str, Any] | None:
    mine = matching_rows(costs, row, LAYOUT)
    if mine.empty:
        return None
    at = mine[mine["batch_per_device"] == batch] if is_known(batch) else mine.iloc[:0]
    at = at if not at.empty else mine[mine["batch_per_device"] == mine["batch_per_device"].max()]
    return at.iloc[0].to_dict()


def _speedup(finding: dict[str, Any] | None, row: dict[str, Any]) -> str:
    if row["world_size"] == 1:
        return "1x (the reference)"
    if not finding or not is_known(finding.get("speedup")):
        return NOT_MEASURED
    text = interval_words(finding["speedup"], finding.get("speedup_ci95", math.nan), "x")
    return f"{text} at batch {int(finding['batch_per_device'])}"


def _break_even(finding: dict[str, Any] | None, row: dict[str, Any]) -> str:
    if row["world_size"] == 1:
        return "(one device)"
    if not finding:
        return NOT_MEASURED
    return break_even_words(
        finding.get("break_even_global_batch", math.nan),
        finding.get("break_even_global_batch_ci95", math.nan),
    )


def _answer(
    row: dict[str, Any], chosen: dict | None, tied: list[dict], finding: dict | None
) -> str:
    if chosen is not None and _same(row, chosen):
        return CHOSEN_BY_RULE if len(tied) > 1 else CHOOSE
    if any(_same(row, other) for other in tied):
        return TIE
    if finding and finding.get("cells_ok", 0) and not is_known(finding.get("speedup")):
        return ACCURACY_ONLY if _rules(finding) else NOT_MEASURED
    if not finding or not finding.get("cells_ok", 0):
        return NOT_MEASURED
    speedup = _speedup(finding, row)
    if speedup.startswith(UNRESOLVED):
        return UNRESOLVED
    return SLOWER if chosen is not None else ""


def below_table(findings: pd.DataFrame, cells: pd.DataFrame) -> list[str]:
    """The lines under the answer table: why the choice is by img/s, the layouts left out
    of it because the study cannot run them (one line for all), and where the frameworks
    ran different CPU kernels, which (one line)."""
    findings, cells = with_network(findings) if len(findings) else findings, with_network(cells)
    left_out = []
    for row in findings.to_dict("records") if len(findings) else []:
        reason = _cannot_run(cells, row)
        if reason:
            where = Layout(int(row["nodes"]), int(row["devices_per_node"])).words(row["network"])
            left_out.append((row["strategy"], f"{where} ({short_model(row['model'])})", reason))
    lines = [left_out_line(left_out), kernels_line(cells)]
    return [CHOICE_RULE, *(line for line in lines if line)]


def answer_table(
    findings: pd.DataFrame, costs: pd.DataFrame, cells: pd.DataFrame, prices: Prices | None
) -> pd.DataFrame:
    """The answer table's rows as text (COLUMNS), per model: the chosen layout first, then
    those tied with it, the slower ones, and the layouts measured but without a number;
    the layouts the study cannot run are left to ``below_table``."""
    costs, cells = with_network(costs), with_network(cells)
    findings = with_network(findings) if not findings.empty else findings
    measured = set(costs.get("model", []))  # models with throughput first
    models = sorted(set(findings.get("model", [])) | measured, key=lambda m: (m not in measured, m))
    rows = []
    for model in models:
        mine_costs = costs[costs["model"] == model] if not costs.empty else costs
        chosen, tied = None, []
        if not mine_costs.empty:
            chosen, _ = _pick(mine_costs, findings)
            tied = _tied(mine_costs).to_dict("records")
        layouts = findings[findings["model"] == model].to_dict("records") if len(findings) else []
        if chosen is not None and not any(_same(chosen, r) for r in layouts):
            layouts.insert(0, {k: chosen[k] for k in [*LAYOUT, "world_size"]})
        largest = mine_costs["batch_per_device"].max() if not mine_costs.empty else math.nan
        out = []
        for row in layouts:
            if _cannot_run(cells, row):
                continue
            finding = _finding(findings, row) if row.get("world_size", 2) > 1 else None
            batch = finding.get("batch_per_device", math.nan) if finding else math.nan
            if chosen is not None and _same(row, chosen):
                batch = chosen["batch_per_device"]
            answer = _answer(row, chosen, tied, finding)
            out.append(
                (
                    ORDER.index(answer) if answer in ORDER else len(ORDER),
                    [
                        answer,
                        _layout_cell(row),
                        img_s_words(_cost_row(mine_costs, row, largest)),
                        _speedup(finding, row),
                        _break_even(finding, row),
                        cost_words(_cost_row(mine_costs, row, batch), prices),
                        accuracy_words(row, findings),
                        quality_words(cells, row, finding),
                    ],
                )
            )
        rows += [cells_ for _, cells_ in sorted(out, key=lambda item: item[0])]
    return pd.DataFrame(rows, columns=COLUMNS)
