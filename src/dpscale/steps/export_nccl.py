"""A study's collectives cells -> nccl-tests all_reduce_perf logs (analysis.results.nccl_export),
one per measured layout, so that ``dpscale predict`` can read a link measured by dpscale as
it reads a cluster's own log. Run by ``dpscale export-nccl``."""

from __future__ import annotations

from pathlib import Path

from dpscale.analysis.results.nccl_export import export_logs
from dpscale.steps.io import read_optional


def export(results: str | Path, out: str | Path) -> str:
    """The lines printed: one per log written, or why none was."""
    folder = Path(results)
    table = read_optional(folder / "tables" / "collectives.csv")
    if table.empty:
        raise SystemExit(
            f"dpscale: export-nccl: {folder} has no collectives rows (tables/collectives.csv); "
            "give a study's results folder (results/<study>) whose modes include collectives"
        )
    written = export_logs(table, Path(out), folder.name)
    if not written:
        raise SystemExit(
            f"dpscale: export-nccl: {folder} has no collectives cell of 2 or more ranks measured "
            "by dpscale"
        )
    return "\n".join(f"dpscale: wrote {path}" for path in written)
