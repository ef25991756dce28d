"""Two analyses of the same cells, file by file: which outputs are byte-identical, and for
each CSV that is not, the columns that differ, in how many rows, by how much.

    .venv/bin/python benchmarks/tables_equal.py BEFORE_DIR AFTER_DIR [--glob 'tables/*.csv']

Used for a refactoring's equality check: run the old and the new checkout's analysis on one
study's cell results (copied, so no cell is measured again) and compare their outputs.
Exits 0 whether or not they differ: the listing is the result.
"""

from __future__ import annotations

import argparse
import filecmp
from pathlib import Path

import numpy as np
import pandas as pd


def differing_columns(before: pd.DataFrame, after: pd.DataFrame) -> list[str]:
    """One line per column whose values differ (NaN equals NaN), with the largest change."""
    lines = []
    for column in sorted(set(before.columns) | set(after.columns)):
        if column not in before or column not in after:
            lines.append(f"  {column}: only {'after' if column in after else 'before'}")
            continue
        a, b = before[column], after[column]
        same = (a == b) | (a.isna() & b.isna())
        if same.all():
            continue
        numeric = pd.to_numeric(a, errors="coerce"), pd.to_numeric(b, errors="coerce")
        both = numeric[0].notna() & numeric[1].notna() & ~same
        change = ""
        if both.any():
            relative = (numeric[1][both] - numeric[0][both]).abs() / numeric[0][both].abs()
            change = f", largest relative change {np.nanmax(relative.to_numpy()):.3g}"
        lines.append(f"  {column}: {int((~same).sum())} of {len(a)} rows differ{change}")
    return lines


def compare_csv(before: Path, after: Path) -> list[str]:
    a, b = pd.read_csv(before), pd.read_csv(after)
    if len(a) != len(b):
        return [f"  rows: {len(a)} before, {len(b)} after"]
    return differing_columns(a, b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--glob", default="**/*.csv", help="files to compare, under each dir")
    args = parser.parse_args()
    names = sorted(
        {p.relative_to(args.before) for p in args.before.glob(args.glob)}
        | {p.relative_to(args.after) for p in args.after.glob(args.glob)}
    )
    identical = 0
    for name in names:
        before, after = args.before / name, args.after / name
        if not before.exists() or not after.exists():
            print(f"{name}: only {'after' if after.exists() else 'before'}")
        elif filecmp.cmp(before, after, shallow=False):
            identical += 1
        else:
            print(f"{name}: differs")
            if name.suffix == ".csv":
                print("\n".join(compare_csv(before, after)))
    print(f"{identical} of {len(names)} files byte-identical")


if __name__ == "__main__":
    main()
