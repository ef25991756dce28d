"""Which CPU kernels each strategy's framework ran (``cpu_kernels`` of cells.csv), and the
answer's one line where they differ: a framework without oneDNN beside one with it may be
slower for its math library rather than for how it scales (TensorFlow's default Eigen
kernels read 2.9x slower than oneDNN on an AVX2 CPU: docs/decisions/tensorflow-onednn-on.md)."""

from __future__ import annotations

import pandas as pd

NOT_RECORDED = "not recorded"


def kernels_by_strategy(cells: pd.DataFrame) -> dict[str, str]:
    """Strategy -> the distinct kernels its cells that read ``ok`` ran, in words ("; "
    between several); strategies whose cells recorded none are left out."""
    if cells.empty or not {"strategy", "cpu_kernels", "status"} <= set(cells.columns):
        return {}
    measured = cells[cells["status"] == "ok"]
    found = {}
    for name, mine in measured.groupby("strategy", sort=True):
        values = sorted({str(v) for v in mine["cpu_kernels"].dropna() if str(v).strip()})
        if values:
            found[str(name)] = "; ".join(values)
    return found


def onednn_by_strategy(cells: pd.DataFrame) -> dict[str, set[bool]]:
    """Strategy -> whether its cells ran oneDNN / MKL-DNN (both values where cells differ)."""
    if cells.empty or not {"strategy", "cpu_onednn", "status"} <= set(cells.columns):
        return {}
    measured = cells[cells["status"] == "ok"].dropna(subset=["cpu_onednn"])
    return {
        str(name): {bool(v) for v in mine["cpu_onednn"]}
        for name, mine in measured.groupby("strategy", sort=True)
    }


def kernels_line(cells: pd.DataFrame) -> str:
    """One line where the strategies of one study ran different CPU math libraries (some
    with oneDNN, some without); "" where they agree or did not record it."""
    onednn = onednn_by_strategy(cells)
    seen = set().union(*onednn.values()) if onednn else set()
    if len(seen) < 2:
        return ""
    words = kernels_by_strategy(cells)
    without = [name for name, values in onednn.items() if False in values]
    listed = "; ".join(f"{name}: {words.get(name, NOT_RECORDED)}" for name in sorted(onednn))
    return (
        f"The frameworks did not run the same CPU kernels ({listed}): "
        f"{' and '.join(without)} ran without oneDNN, so a gap between them may come from "
        "the math library rather than from scaling (each adapter's kernel options: "
        "docs/guide/configuration.md)."
    )
