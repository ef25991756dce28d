"""The pieces every matplotlib figure of the report shares: the file-only backend, a figure
saying why it is empty, legends under the panels, and the line styles and markers a figure
tells its series apart by. Apart from the figures themselves (plots, pooled_plots,
*_plot), so that a figure module imports them without importing another family's figures."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402

LINESTYLES = ["-", "--", ":", "-."]
MARKERS = "osD^v<>ph*"


def empty_figure(path: Path, message: str) -> None:
    figure, axis = plt.subplots(figsize=(6, 2))
    axis.axis("off")
    axis.text(0.5, 0.5, message, ha="center", va="center")
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


def legend_below(axis) -> None:
    """The axis's legend under its data area, never over it or beside it: a long legend
    makes the saved figure taller (save_with_legends), not the panel narrower."""
    axis.legend(
        fontsize="small",
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        ncol=2,
        frameon=False,
    )


def save_with_legends(figure, path: Path) -> None:
    """Save with the canvas grown to hold the legends under the panels (bbox "tight"), so
    each panel keeps the size it was given."""
    figure.subplots_adjust(wspace=0.3)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
