"""A folder cell run by the real launcher in its framework's environment, as the folder
integration tests of each framework run it."""

from __future__ import annotations

from pathlib import Path

from dpscale.launch import launcher
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, FolderInput, Measure, ModelConfig
from dpscale.plan.result import read_result

MODEL = ModelConfig("resnet18", "imagenet", 32, 10)
# the loader's workers run beside the ranks on a 2-core machine: these tests time nothing
MEASURE = Measure(warmup_steps=1, windows=2, steps_per_window=2, timeout_s=600, oversubscribe=True)
BATCH = 2


def launch_folder_cell(
    tmp_path: Path, strategy: str, env: str, devices: int, settings: FolderInput
) -> dict:
    """The cell (1 node, ``devices`` per node, batch 2) launched; its result, checked against
    the schema, after asserting it ran ok on the folder it was given."""
    cell = Cell(
        "test", strategy, MODEL, "folder", 1, devices, BATCH, measure=MEASURE,
        image_folder=settings,
    )  # fmt: skip
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, ensure_env(env), tmp_path / "cell.log")
    result = read_result(out)  # validates against the schema
    log = (tmp_path / "cell.log").read_text()[-3000:]
    assert status == result["status"] == "ok", (result["reason"], log)
    assert result["cell"]["image_folder"]["path"] == settings.path
    return result


def images_read_per_rank(pipeline: dict) -> int:
    """What one rank reads: the timed steps' batches and the loader's alone."""
    steps = MEASURE.warmup_steps + MEASURE.windows * MEASURE.steps_per_window
    loader = pipeline["warmup_batches"] + MEASURE.windows * MEASURE.steps_per_window
    return (steps + loader) * BATCH
