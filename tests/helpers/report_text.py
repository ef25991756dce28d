"""A report caption (report/*.rst, Jinja) rendered with a study config, and the least config
the landing page (workflow.rst) renders with: for tests of what the report's text says."""

from __future__ import annotations

from typing import Any

import jinja2

from conftest import REPO

LANDING: dict[str, Any] = {
    "study": "s",
    "report_description": "",
    "report_answer": {"columns": [], "rows": [], "below": [], "notes": []},
    "report_answer_figure": [],
    "published_lines": [],
    "strategies": ["a"],
    "models": [{"name": "resnet18", "image_size": 64, "classes": 10}],
    "batch_sizes": [4],
    "devices_per_node": [1],
    "nodes": [1],
    "accelerator": "cpu",
    "precision": "fp32",
    "measure": {"warmup_steps": 1, "steps_per_window": 1},
}


def render(template: str, config: dict[str, Any]) -> str:
    """``report/<template>`` as Snakemake's report renders it with ``config``."""
    text = (REPO / "report" / template).read_text(encoding="utf-8")
    return jinja2.Template(text).render(snakemake={"config": config})
