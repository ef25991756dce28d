"""Matplotlib's settings, kept to one step of a job that runs several (dpscale.steps)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def own_plot_settings(shared_process: bool) -> Iterator[None]:
    """Matplotlib's settings as a step of its own job would find them: a figure function that
    sets a theme (seaborn's set_theme) changes them for the rest of the process, so in a job
    of several steps each step's changes are undone when it ends."""
    if not shared_process:
        yield
        return
    import matplotlib  # only jobs of several steps pay for it; each of them draws figures

    with matplotlib.rc_context():
        yield
