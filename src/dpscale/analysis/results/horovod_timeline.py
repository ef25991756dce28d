"""How much of each step's all-reduce Horovod ran behind the backward pass, read from Horovod's
own timeline (``HOROVOD_TIMELINE``), which cells keep beside their result when asked (config
``horovod_timeline``; the result names the file in ``system.horovod_timeline``).

The timeline is a Chrome trace that rank 0, Horovod's coordinator, writes
(horovod/common/timeline.cc): a JSON array of events, one "process" (``pid``) per tensor,
named by a ``process_name`` metadata event; per tensor and operation a ``B``/``E`` pair
NEGOTIATE_ALLREDUCE (from the first rank's request for the tensor, as the coordinator saw it,
until every rank had asked), then one ALLREDUCE with nested activities (fusion-buffer copies,
the backend's all-reduce). Horovod closes the array after every event, but a process that
dies, or a reader that comes while Horovod writes, finds it unterminated: the reader takes
every whole event and leaves out a cut one.

Gradient tensors are those Horovod's gradient wrappers (``hvd.DistributedGradientTape``,
``hvd.DistributedOptimizer``) all-reduce, under their ``<wrapper>_Allreduce`` name scope
(horovod/tensorflow/__init__.py); the adapter's barrier, sums and gathers are named otherwise
(in eager mode ``HorovodAllreduce``, ``HorovodAllgather``). The k-th ALLREDUCE of each
gradient tensor belongs to step k, handed to Horovod at the NEGOTIATE_ALLREDUCE begin just
before it (a negotiation with no all-reduce after it, as ``hvd.join()`` leaves at the end,
belongs to no step). A step's gradients are all handed over at the last of these begins:
all-reduce time before it ran while gradients were still being computed (hidden behind
backward), time after it was exposed.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.results.bucket_tables import TIMELINE_CELL
from dpscale.analysis.results.import_logs import LogError, quoted
from dpscale.analysis.results.tables import cell_row
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES
from dpscale.plan.result import cells_dir_of
from dpscale.plan.user_files import TIMELINE, Unreadable, read_text

ALLREDUCE, NEGOTIATE = "ALLREDUCE", "NEGOTIATE_ALLREDUCE"
GRADIENT_SCOPE = "_Allreduce/"  # in the names of the gradient wrappers' all-reduces
ACTIVITY_COLUMNS = ["tensor", "activity", "depth", "begin_us", "end_us"]
STEP_COLUMNS = ["step", "tensors", "submitted_s", "allreduce_s", "hidden_s", "exposed_s"]
MEASURES = ("allreduce_s", "hidden_s", "exposed_s")
COLUMNS = [
    *TIMELINE_CELL,
    "mode",
    "file",
    "tensors",
    "warmup_steps",
    "steps",
    *[f"{m}{end}" for m in MEASURES for end in ("", "_lo", "_hi")],
    "hidden_fraction",
    "reason",
]


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The trace's events, whole ones only: the array may lack its closing ``]`` or end in
    the middle of an event (Horovod still writing, or killed). A LogError where the file is
    over plan.user_files' bound for a timeline or not UTF-8."""
    try:
        text = read_text(path, TIMELINE)
    except Unreadable as error:
        raise LogError(str(error)) from None
    try:
        events = json.loads(text)
    except json.JSONDecodeError:
        return _whole_events(text)
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _whole_events(text: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    start = text.find("[")
    if start < 0:
        return []
    events, at = [], start + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] == "]":
            return events
        try:
            event, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return events  # an event cut short: the file ends there
        if isinstance(event, dict):
            events.append(event)


def _value(value: Any) -> str:
    """A value of the trace in a message: its repr, cut at 20 characters."""
    text = repr(value)
    return text[:20] + ("..." if len(text) > 20 else "")


def _refused(index: int, event: dict[str, Any], what: str, allowed: str) -> LogError:
    phase = quoted(str(event.get("ph")), 8)
    return LogError(f"has event {index} (ph {phase}) with {what}; allowed: {allowed}")


def _pid(index: int, event: dict[str, Any]) -> int | str:
    pid = event.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int | str):
        raise _refused(index, event, f"pid {_value(pid)}", "a number or a name")
    return pid


def _ts(index: int, event: dict[str, Any]) -> float:
    """The event's time in microseconds since Horovod started: a number of 0 or more."""
    ts = event.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not 0 <= ts < math.inf:
        raise _refused(
            index,
            event,
            f"ts {_value(ts)}",
            "microseconds since Horovod started, 0 or more",
        )
    return float(ts)


def _text(index: int, event: dict[str, Any], value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _refused(index, event, f"{what} {_value(value)}", "a string")
    return value


def activities(events: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per closed ``B``/``E`` pair: tensor name, activity, nesting depth (0: the
    top level, NEGOTIATE_ALLREDUCE or ALLREDUCE), begin and end in microseconds since
    Horovod started. A ``B`` left open (the trace cut short) is left out; an event no
    Horovod writes (a time that is no number, or below 0; an end before its begin) is a
    LogError naming it."""
    names: dict[Any, str] = {}
    open_: dict[Any, list[tuple[str, float]]] = {}
    rows = []
    for index, event in enumerate(events):
        phase = event.get("ph")
        if phase == "M":
            args = event.get("args")
            if event.get("name") == "process_name" and isinstance(args, dict) and "name" in args:
                names[_pid(index, event)] = _text(index, event, args["name"], "args.name")
        elif phase == "B":
            name = _text(index, event, event.get("name", ""), "name")
            open_.setdefault(_pid(index, event), []).append((name, _ts(index, event)))
        elif phase == "E" and open_.get(pid := _pid(index, event)):
            activity, begin = open_[pid].pop()
            end = _ts(index, event)
            if end < begin:
                raise _refused(
                    index,
                    event,
                    f"ts {end:g}, before its begin at {begin:g}",
                    "an end after its begin",
                )
            depth = len(open_[pid])
            rows.append((names.get(pid, str(pid)), activity, depth, begin, end))
    return pd.DataFrame(rows, columns=ACTIVITY_COLUMNS)


def _union_us(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of ``intervals`` within [lo, hi]."""
    clipped = sorted((max(b, lo), min(e, hi)) for b, e in intervals if min(e, hi) > max(b, lo))
    total, reach = 0.0, -math.inf
    for begin, end in clipped:
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def _handed_over(negotiations: Any, tensor: str, allreduces: np.ndarray) -> np.ndarray:
    """Per all-reduce of ``tensor``, the begin of the negotiation just before it (NaN: none)."""
    if tensor not in negotiations.groups:
        return np.full(len(allreduces), math.nan)
    begins = np.sort(negotiations.get_group(tensor).to_numpy(dtype=float))
    before = np.searchsorted(begins, allreduces[:, 0], side="right") - 1
    return np.where(before >= 0, begins[np.maximum(before, 0)], math.nan)


def step_overlap(table: pd.DataFrame, warmup_steps: int = 0) -> pd.DataFrame:
    """One row per whole step after ``warmup_steps``: the gradient tensors, when the last was
    handed to Horovod (``submitted_s``, since Horovod started), the all-reduce time (union
    of the step's ALLREDUCE intervals) and its parts before (``hidden_s``) and after
    (``exposed_s``) that moment; hidden_s + exposed_s = allreduce_s. A step is whole when
    every gradient tensor has its ALLREDUCE, and a NEGOTIATE_ALLREDUCE before it, in the
    trace."""
    gradients = table["tensor"].str.contains(GRADIENT_SCOPE, regex=False)
    top = table[(table["depth"] == 0) & gradients].sort_values("begin_us", kind="stable")
    allreduces = {
        tensor: group[["begin_us", "end_us"]].to_numpy()
        for tensor, group in top[top["activity"] == ALLREDUCE].groupby("tensor")
    }
    if not allreduces:
        return pd.DataFrame(columns=STEP_COLUMNS)
    negotiations = top[top["activity"] == NEGOTIATE].groupby("tensor")["begin_us"]
    handed = {tensor: _handed_over(negotiations, tensor, ar) for tensor, ar in allreduces.items()}
    tensors = sorted(allreduces)
    rows = []
    for step in range(warmup_steps, min(len(allreduces[t]) for t in tensors)):
        begins = [handed[t][step] for t in tensors]
        if any(math.isnan(b) for b in begins):
            continue  # a tensor's hand-over is not in the trace: not a whole step
        submitted = max(begins)
        intervals = [tuple(allreduces[t][step]) for t in tensors]
        hidden = _union_us(intervals, -math.inf, submitted)
        exposed = _union_us(intervals, submitted, math.inf)
        rows.append(
            {
                "step": step,
                "tensors": len(tensors),
                "submitted_s": submitted / 1e6,
                "allreduce_s": (hidden + exposed) / 1e6,
                "hidden_s": hidden / 1e6,
                "exposed_s": exposed / 1e6,
            }
        )
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def median_interval(values: Iterable[float]) -> tuple[float, float, float]:
    """The median and its distribution-free 95% interval: the order statistics
    x_(j), x_(n+1-j) with the largest j for which P(Binomial(n, 1/2) < j) <= 2.5% (coverage at
    least 95%); NaN bounds below 6 values, where no such pair exists."""
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job
    x = np.sort(np.asarray(list(values), dtype=float))
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    j = int((stats.binom.cdf(np.arange(n + 1), n, 0.5) <= 0.025).sum())
    if j == 0:
        return float(np.median(x)), math.nan, math.nan
    return float(np.median(x)), float(x[j - 1]), float(x[n - j])


def timeline_file(result: dict[str, Any], cells_dir: str | Path) -> Path | None:
    """The timeline a result names, beside the result (``<cells>/<cell_id>.json``)."""
    name = result["system"].get("horovod_timeline")
    if not name:
        return None
    return (Path(cells_dir) / f"{result['cell']['cell_id']}.json").parent / name


def cell_timeline_row(result: dict[str, Any], cells_dir: str | Path) -> dict[str, Any] | None:
    """An ok cell's row: its steps' medians and intervals, or why it has none (``reason``);
    None when the cell kept no timeline or did not measure."""
    path = timeline_file(result, cells_dir)
    if path is None or result["status"] != "ok":
        return None
    cell_columns = cell_row(result)
    warmup = int(result["cell"].get("measure", {}).get("warmup_steps", 0))
    row: dict[str, Any] = {k: cell_columns[k] for k in (*TIMELINE_CELL, "mode")}
    row.update(file=path.name, warmup_steps=warmup, steps=0, reason=None)
    if not path.is_file():
        row["reason"] = f"{path.name} is missing beside the result"
        return row
    try:
        steps = step_overlap(activities(read_events(path)), warmup)
    except LogError as error:
        raise LogError(f"{path.name} {error}") from None
    if steps.empty:
        row["reason"] = "no whole step of gradient all-reduces after the warm-up steps"
        return row
    row.update(tensors=int(steps["tensors"].iloc[0]), steps=len(steps))
    for measure in MEASURES:
        median, lo, hi = median_interval(steps[measure])
        row.update({measure: median, f"{measure}_lo": lo, f"{measure}_hi": hi})
    total = steps["allreduce_s"]
    fraction = steps["hidden_s"][total > 0] / total[total > 0]
    row["hidden_fraction"] = float(fraction.median()) if not fraction.empty else math.nan
    return row


def timeline_table(results: Iterable[dict[str, Any]], cells_dir: str | Path) -> pd.DataFrame:
    """One row per cell that kept Horovod's timeline (see :func:`cell_timeline_row`); no
    rows, with the columns, when none did."""
    rows = []
    for result in results:
        try:
            row = cell_timeline_row(result, cells_dir)
        except (OSError, KeyError, ValueError) as error:
            print(
                f"[dpscale] {result['cell']['cell_id']}: Horovod timeline not read ({error})",
                file=sys.stderr,
            )
            continue
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def cells_folder(paths: Iterable[str | Path]) -> Path | None:
    """The ``cells`` folder the results lie under."""
    return next((f for f in map(cells_dir_of, paths) if f is not None), None)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The report's view: the layout, then each measure as median [95% interval] in seconds
    per step and the hidden share, the answer before the bookkeeping (the CSV keeps all)."""
    if table.empty:
        return table
    out = table[[NODES, DEVICES_PER_NODE, NETWORK, "batch_per_device", "comm", "steps"]]
    out = out.copy()
    for measure in MEASURES:
        out[f"{measure} [95%]"] = [
            _with_interval(row[measure], row[f"{measure}_lo"], row[f"{measure}_hi"])
            for _, row in table.iterrows()
        ]
    out["hidden share"] = [f"{v:.0%}" if pd.notna(v) else "" for v in table["hidden_fraction"]]
    out["reason"] = [r if isinstance(r, str) else "" for r in table["reason"]]
    return out


def _with_interval(median: float, lo: float, hi: float) -> str:
    if pd.isna(median):
        return ""
    if pd.isna(lo) or pd.isna(hi):
        return f"{median:.3f} (too few steps for an interval)"
    return f"{median:.3f} [{lo:.3f}, {hi:.3f}]"
