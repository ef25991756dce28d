"""Matplotlib's settings, kept to one step of a job that runs several (dpscale.steps)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def own_plot_settings() -> Iterator[None]:
    """Matplotlib's settings as a step of its own job would find them: a figure function that
    sets a theme (seaborn's set_theme) changes them for the rest of the process, so in a job
    of several steps each step's changes are undone when it ends. Only such jobs call it (a
    job of one step need not import matplotlib); each of them draws figures."""
    import matplotlib

    with matplotlib.rc_context():
        yield
