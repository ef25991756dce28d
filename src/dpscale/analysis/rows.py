"""Which rows an analysis reads. The analyses that compare layouts and networks (findings,
cost, start-up, the answer, their figures, the base communication model, the post
comparison) read only the cells without a communication remedy, so no remedy is averaged
into them; the remedies are compared beside none by ``analysis.remedy_gains`` and learnt by
``analysis.commmodel.remedy_fit``, and the tidy tables keep every row."""

from __future__ import annotations

import pandas as pd


def without_remedies(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of cells without a communication remedy (all rows of a table without a
    ``comm`` column)."""
    if "comm" not in table.columns:
        return table
    return table[table["comm"].fillna("none") == "none"].reset_index(drop=True)
