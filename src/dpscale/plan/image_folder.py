"""A user's image folder (config ``image_folder``, mode ``folder``), checked before any job.

The layout is ImageNet's, as torchvision's ImageFolder reads it: one sub-folder per class
(sorted names give the labels), holding image files at any depth. Plan time reads names
only, never an image's bytes (plan code imports no image library): a file whose name ends
in an image extension counts here; one that does not decode is skipped and counted by the
framework's pipeline (dpscale.frameworks.torch_folder) when the cell runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.plan.errors import ConfigError

# what ImageFolder is given as ``extensions``: a file counts when its name, lower-cased,
# ends in one of them; every other file is left out
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
FIELD = "image_folder.path"


@dataclass(frozen=True)
class FolderSummary:
    """What plan time knows of a checked folder: its classes (sorted) and image files."""

    classes: tuple[str, ...]
    images: int


def is_image_name(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _images_below(folder: Path) -> int:
    """Image files at any depth below ``folder`` (links followed, as ImageFolder does)."""
    return sum(
        is_image_name(name)
        for _, _, names in os.walk(folder, followlinks=True, onerror=_raise)
        for name in names
    )


def _raise(error: OSError) -> None:
    raise error


def _class_folders(root: Path) -> tuple[list[str], bool]:
    """The class folders' names, sorted, and whether the folder holds anything at all."""
    with os.scandir(root) as entries:
        found = list(entries)
    return sorted(entry.name for entry in found if entry.is_dir()), bool(found)


def check_folder(path: str) -> FolderSummary:
    """The folder's classes and image count; ConfigError with one line where it is not an
    image folder (missing, not a folder, empty, no class folders, a class without images)."""
    root = Path(path)
    shown = f"{path[:80]!r}"
    try:
        if not root.exists():
            raise ConfigError(f"{FIELD}: {shown} does not exist; allowed: an image folder")
        if not root.is_dir():
            raise ConfigError(f"{FIELD}: {shown} is not a folder; allowed: an image folder")
        classes, anything = _class_folders(root)
        if not anything:
            raise ConfigError(
                f"{FIELD}: {shown} is empty; allowed: one sub-folder per class holding "
                f"{'/'.join(IMAGE_EXTENSIONS)} files"
            )
        if not classes:
            raise ConfigError(
                f"{FIELD}: {shown} has no class sub-folders; allowed: one sub-folder per "
                "class (ImageNet's layout)"
            )
        counts = {name: _images_below(root / name) for name in classes}
    except OSError as error:  # unreadable, a name too long, a loop of links
        raise ConfigError(f"{FIELD}: {shown} cannot be read: {error.strerror or error}") from None
    empty = [name for name, count in counts.items() if count == 0]
    if empty:
        raise ConfigError(
            f"{FIELD}: class folder {empty[0][:80]!r} holds no {'/'.join(IMAGE_EXTENSIONS)} "
            f"file ({len(empty)} of {len(classes)} classes without one)"
        )
    return FolderSummary(tuple(classes), sum(counts.values()))


def check_image_folder(config: dict[str, Any], model_classes: list[int]) -> None:
    """Studies with mode ``folder``: a path is given, the folder is an image folder, and
    every study model has an output for each of its classes. Without the mode, nothing
    is read."""
    if "folder" not in config["modes"]:
        return
    path = config["image_folder"]["path"]
    if not path:
        raise ConfigError(
            f"{FIELD}: mode 'folder' needs an image folder; allowed: a folder of class sub-folders"
        )
    summary = check_folder(path)
    fewest = min(model_classes)
    if len(summary.classes) > fewest:
        raise ConfigError(
            f"{FIELD}: {len(summary.classes)} classes, but a study model has {fewest} "
            "outputs; allowed: models with classes >= the folder's class count"
        )


# the rule every framework's folder pipeline keeps for files that do not decode: each is
# skipped (the next one stands in) until this many in a row, then the cell fails, saying so
MAX_SKIPS = 16


def too_many_skips(where: str) -> str:
    """The one-line reason of a cell whose pipeline met MAX_SKIPS undecodable files in a row
    (``where``: "from sample 12", "of rank 1's shard")."""
    return (
        f"image_folder: {MAX_SKIPS} files in a row {where} do not decode as images; the "
        "folder holds too few readable ones"
    )
