"""Reading and writing the tidy tables the steps pass between rules."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.plan.user_files import TABLE, Unreadable, read_text


def read(path: str | Path) -> pd.DataFrame:
    return pd.read_csv(path)


def read_given(path: str | Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """A table a person names (on the command line, in the config): read only within
    plan.user_files' bound for a table, as UTF-8 CSV holding ``columns``; else Unreadable,
    one line without the file's name."""
    text = read_text(path, TABLE)
    try:
        table = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        first = (str(error).strip().splitlines() or [""])[0]
        raise Unreadable(f"is not a CSV table ({first[:120]})") from None
    missing = [column for column in columns if column not in table]
    if missing:
        raise Unreadable(f"lacks column {missing[0]!r} (and {len(missing) - 1} more)")
    return table


def read_optional(path: str | Path | None) -> pd.DataFrame:
    """A table the study may not have (training tables without mode train): empty if absent
    (or written without a single column)."""
    if not path or not Path(path).is_file():
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def write(frame: pd.DataFrame, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def write_lines(lines: list[str], path: str | Path) -> None:
    """Sentences for the report's texts, a JSON list (report/*.rst show them)."""
    Path(path).write_text(json.dumps(lines, indent=1) + "\n", encoding="utf-8")


def read_lines(path: str | Path | None) -> list[str]:
    return json.loads(Path(path).read_text(encoding="utf-8")) if path else []


def figure_path(path: str | Path) -> Path:
    """The path of a figure to draw, its folder made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def or_message(frame: pd.DataFrame, column: str, message: Any) -> pd.DataFrame:
    """The table, or one column that says why it is empty (not the page's bare "No rows")."""
    if not frame.empty:
        return frame
    return pd.DataFrame({column: message if isinstance(message, list) else [message]})
