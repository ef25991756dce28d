"""What users measured elsewhere (config ``imports``, rule imports in
workflow/rules/imports.smk) -> imported_collectives.csv for the collectives rule, and the
imported throughput table with its HTML page."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dpscale.analysis.results.imports import imported_collectives, imported_throughput
from dpscale.render.html import write_table_html
from dpscale.steps.io import or_message, write

Files = Mapping[str, Any]


def imports(inputs: Files, outputs: Files, params: Files) -> str:
    """The configured logs -> their all-reduce sizes and throughput runs, each with its
    source."""
    entries = json.loads(params["imports"])
    collectives = imported_collectives(entries, params["study"])
    throughput = imported_throughput(entries, params["study"])
    write(collectives, outputs["collectives"])
    write(throughput, outputs["throughput"])
    shown = or_message(
        throughput,
        "imported throughput",
        "no horovod-synthetic or tf-cnn-benchmarks log in imports",
    )
    write_table_html(shown, outputs["throughput_html"], "Imported throughput")
    return (
        f"[dpscale] {len(entries)} imported logs: {len(collectives)} all-reduce sizes, "
        f"{len(throughput)} throughput runs"
    )
