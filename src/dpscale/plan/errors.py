"""The one error a study's bad input raises, at plan time, before any job starts."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad study configuration; the message is one line naming the field."""


class UnknownKeyError(ConfigError):
    """A key the schema does not have (a typo, mostly). ``path`` is the key's own place in
    the merged config (``("batch_size",)``), so that whoever read the study files can name
    the file that gave it (dpscale.study_check)."""

    def __init__(self, message: str, path: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.path = path
