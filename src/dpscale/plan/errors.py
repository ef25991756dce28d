"""The one error a study's bad input raises, at plan time, before any job starts."""


class ConfigError(ValueError):
    """A bad study configuration; the message is one line naming the field."""
