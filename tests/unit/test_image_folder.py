"""A user's image folder (config ``image_folder``, mode ``folder``): the plan-time checks of
the folder (one line each, never a traceback, over generated trees too), the folder cells
of the matrix and who skips them, and the loader-or-device verdict of a result."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpscale.plan.cell import Cell, FolderInput
from dpscale.plan.errors import ConfigError
from dpscale.plan.image_folder import check_folder, is_image_name
from dpscale.plan.strategy import NO_FOLDER_PIPELINE
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.runner.records import pipeline_record
from helpers.image_folder import write_image_folder


def one_line_error(path: Path | str) -> str:
    with pytest.raises(ConfigError) as raised:
        check_folder(str(path))
    message = str(raised.value)
    assert "\n" not in message and message.startswith("image_folder.path: ")
    return message


def test_a_generated_folder_passes_with_its_classes_and_images(tmp_path):
    folder = write_image_folder(tmp_path / "images", classes=3, per_class=8)
    (folder / "class0" / "notes.txt").write_text("not an image, left out")
    summary = check_folder(str(folder))
    assert summary.classes == ("class0", "class1", "class2")
    assert summary.images == 24


def test_each_broken_folder_gets_its_own_line(tmp_path):
    assert "does not exist" in one_line_error(tmp_path / "missing")
    (tmp_path / "file.jpg").write_bytes(b"x")
    assert "is not a folder" in one_line_error(tmp_path / "file.jpg")
    (tmp_path / "empty").mkdir()
    assert "is empty" in one_line_error(tmp_path / "empty")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"x")
    assert "no class sub-folders" in one_line_error(tmp_path / "flat")
    (tmp_path / "mixed" / "cat").mkdir(parents=True)
    (tmp_path / "mixed" / "dog").mkdir()
    (tmp_path / "mixed" / "cat" / "a.PNG").write_bytes(b"x")
    (tmp_path / "mixed" / "dog" / "a.gif").write_bytes(b"x")
    message = one_line_error(tmp_path / "mixed")
    assert "'dog'" in message and "holds no" in message and "1 of 2 classes" in message


def test_images_deeper_in_a_class_folder_count(tmp_path):
    (tmp_path / "root" / "cat" / "2024" / "june").mkdir(parents=True)
    (tmp_path / "root" / "cat" / "2024" / "june" / "a.jpeg").write_bytes(b"x")
    assert check_folder(str(tmp_path / "root")).images == 1


NAMES = st.text(alphabet="abcXYZ01._- ", min_size=1, max_size=12).filter(
    lambda name: name not in {".", ".."}
)
FILES = st.lists(
    st.tuples(NAMES, st.sampled_from([".jpg", ".JPEG", ".png", ".txt", ".gif", ""])),
    max_size=4,
)
TREES = st.dictionaries(NAMES, st.one_of(st.none(), FILES), max_size=5)


def build_tree(root: Path, tree: dict) -> None:
    """Names mapping to None are files at the top; to a list, class folders of files."""
    root.mkdir()
    for name, files in tree.items():
        if files is None:
            (root / name).write_bytes(b"x")
            continue
        (root / name).mkdir()
        for stem, suffix in files:
            (root / name / f"{stem}{suffix}").write_bytes(b"x")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES)
def test_any_generated_tree_passes_or_gets_one_line(tree):
    folder = Path(tempfile.mkdtemp(prefix="dpscale-folder-")) / "root"
    try:
        build_tree(folder, tree)
        classes = sorted(name for name, files in tree.items() if files is not None)
        # distinct file names per class: ("a", ".jpg") and ("a.jpg", "") are one file
        images = {
            name: {f"{s}{x}" for s, x in tree[name] if is_image_name(f"{s}{x}")} for name in classes
        }
        if not tree:
            expected = "is empty"
        elif not classes:
            expected = "no class sub-folders"
        elif not all(images.values()):
            expected = "holds no"
        else:
            expected = None
        try:
            summary = check_folder(str(folder))
        except ConfigError as error:
            assert "\n" not in str(error) and str(error).startswith("image_folder.path: ")
            assert expected is not None and expected in str(error)
        else:
            assert expected is None
            assert list(summary.classes) == classes
            assert summary.images == sum(len(names) for names in images.values())
    finally:
        shutil.rmtree(folder.parent)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_is_one_line(tmp_path):
    folder = write_image_folder(tmp_path / "images", classes=1, per_class=1)
    (folder / "class0").chmod(0)
    try:
        assert "cannot be read" in one_line_error(folder)
    finally:
        (folder / "class0").chmod(0o755)


def folder_study(default_config: dict, path: str | None, **image_folder) -> dict:
    config = copy.deepcopy(default_config)
    config.update(modes=["folder"], strategies=sorted(STRATEGIES), drift={"probes": 0})
    config["image_folder"] = {"path": path, **image_folder}
    return config


def test_the_default_study_has_no_folder_cells(default_config):
    assert "folder" not in default_config["modes"]
    _, cells = plan_study(default_config, STRATEGIES)
    assert not [cell for cell in cells if cell.mode == "folder" or cell.image_folder]


def test_folder_cells_carry_the_folder_and_every_framework_with_a_pipeline_measures_them(
    default_config, tmp_path
):
    folder = write_image_folder(tmp_path / "images", classes=2, per_class=2)
    config = folder_study(default_config, str(folder), workers=3, pin_memory=True)
    filled, cells = plan_study(config, STRATEGIES)
    assert cells and all(cell.mode == "folder" for cell in cells)
    expected = FolderInput(str(folder), workers=3, prefetch=2, pin_memory=True)
    assert {cell.image_folder for cell in cells} == {expected}
    by_framework: dict[str, set] = {}
    for cell in cells:
        framework = STRATEGIES[cell.strategy].framework
        by_framework.setdefault(framework, set()).add(cell.skip_reason)
    for measured in ("torch", "tensorflow", "mxnet"):  # some of their cells run
        assert by_framework.pop(measured) != {NO_FOLDER_PIPELINE}
    runnable = next(cell for cell in cells if not cell.skip_reason)
    assert Cell.from_json(runnable.to_json()) == runnable
    assert "/folder/" in runnable.cell_id


def test_a_strategy_without_a_folder_pipeline_skips_its_folder_cells(default_config, tmp_path):
    folder = write_image_folder(tmp_path / "images", classes=2, per_class=2)
    config = folder_study(default_config, str(folder))
    without = {
        name: replace(strategy, folder_pipeline=None) if name == "horovod-tf" else strategy
        for name, strategy in STRATEGIES.items()
    }
    _, cells = plan_study(config, without)
    theirs = {cell.skip_reason for cell in cells if cell.strategy == "horovod-tf"}
    assert theirs == {NO_FOLDER_PIPELINE}


def test_a_cell_of_another_mode_reads_as_before(default_config):
    _, cells = plan_study(default_config, STRATEGIES)
    assert "image_folder" not in cells[0].to_dict()


@pytest.mark.parametrize(
    ("path", "words"),
    [(None, "mode 'folder' needs an image folder"), ("/no/such/folder", "does not exist")],
)
def test_a_folder_study_without_a_folder_is_refused_in_one_line(default_config, path, words):
    with pytest.raises(ConfigError, match=words):
        plan_study(folder_study(default_config, path), STRATEGIES)


def test_more_classes_than_a_model_has_outputs_is_refused(default_config, tmp_path):
    folder = write_image_folder(tmp_path / "images", classes=3, per_class=1)
    config = folder_study(default_config, str(folder))
    config["models"] = [{"name": "resnet18", "image_size": 32, "classes": 2}]
    with pytest.raises(ConfigError, match="3 classes, but a study model has 2 outputs"):
        plan_study(config, STRATEGIES)


def test_the_folder_is_not_read_without_the_mode(default_config):
    config = copy.deepcopy(default_config)
    config["image_folder"] = {"path": "/no/such/folder"}
    plan_study(config, STRATEGIES)  # no folder cells: nothing to check


def test_loader_settings_are_checked_by_the_schema(default_config, tmp_path):
    folder = write_image_folder(tmp_path / "images", classes=1, per_class=1)
    with pytest.raises(ConfigError, match="image_folder.workers"):
        plan_study(folder_study(default_config, str(folder), workers=-1), STRATEGIES)


def test_the_loader_binds_when_alone_it_barely_outpaces_training():
    # two ranks, batch 4, 2 batches a window of 0.1 s each: 80 img/s per rank, 160 together
    windows = [[0.1, 0.1], [0.1, 0.1]]
    loader_bound = pipeline_record(windows, 2, 4, 3, training_img_s=150.0)
    assert loader_bound["img_s"] == pytest.approx([160.0, 160.0])
    assert loader_bound["bound_by"] == "loader"
    assert pipeline_record(windows, 2, 4, 3, training_img_s=50.0)["bound_by"] == "device"
