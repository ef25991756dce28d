"""Which rows an analysis reads. The analyses that compare layouts and networks (findings,
cost, start-up, the answer, their figures, the base communication model, the post
comparison) read only the cells without a communication remedy, so no remedy is averaged
into them; the remedies are compared beside none by ``analysis.answers.remedy_gains`` and learnt by
``analysis.laws.commmodel.remedy_fit``, and the tidy tables keep every row."""

from __future__ import annotations

import pandas as pd

from dpscale.plan.remedies import NO_REMEDY


def no_remedy(comm: pd.Series) -> pd.Series:
    """Which rows of a ``comm`` column have no remedy (plan.remedies.is_no_remedy, vectorised:
    a missing value is none)."""
    return comm.fillna(NO_REMEDY) == NO_REMEDY


def without_remedies(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of cells without a communication remedy (all rows of a table without a
    ``comm`` column)."""
    if "comm" not in table.columns:
        return table
    return table[no_remedy(table["comm"])].reset_index(drop=True)


def with_comm(table: pd.DataFrame) -> pd.DataFrame:
    """A table from before the comm dimension (or built by hand) reads as comm ``none``."""
    return table if "comm" in table.columns else table.assign(comm=NO_REMEDY)
