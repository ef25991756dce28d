"""Cell results: building them, validating them against the schema, writing them atomically.

A result file is only ever replaced whole (write to a temporary file in the same folder,
fsync, rename), and every write also leaves a time-stamped copy under ``runs/`` beside
``cells/``, so a rerun or a crash never loses a result that was once complete. Each file
gets the mode a plain ``open`` would give it (``0o666`` less the umask), not the temporary
file's ``0o600``, so a shared results folder is as readable as its owner's umask says.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import IO, Any

from dpscale.plan.cell import Cell, ModelConfig
from dpscale.plan.paths import SCHEMA_DIR
from dpscale.plan.resnet_spec import TRAIN_TO_FORWARD_FLOPS

STATUSES = ("ok", "oom", "failed", "skipped")
SCHEMA_VERSION = 1
# start-up phases from the launch to the first timed window, in order (dpscale.runner.startup)
STARTUP_PHASES = ("launch", "import", "init", "build", "broadcast", "first_step", "warmup")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@cache
def result_schema() -> dict[str, Any]:
    from dpscale.plan.yaml_shape import load_shipped  # yaml and jsonschema: can_validate()

    return load_shipped(SCHEMA_DIR / "result.schema.yaml")


def can_validate() -> bool:
    """Whether this interpreter can check a result against the schema. A site interpreter
    (a cluster's own, a container's) may lack jsonschema or yaml; the runner then writes
    its result unchecked and the launcher, which has both, checks it (read_result)."""
    try:
        import jsonschema  # noqa: F401
        import yaml  # noqa: F401
    except ImportError:
        return False
    return True


def validate_result(result: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` naming the offending field (the error
    ``jsonschema.validate`` would raise, through one validator made once per process)."""
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(result))
    if error is not None:
        raise error


@cache
def _validator() -> Any:
    """The result schema's validator. ``jsonschema.validate`` checks the schema against its
    metaschema on every call, 0.2 s a result; a unit test checks it once instead
    (tests/unit/test_result.py), as the schema is dpscale's own."""
    import jsonschema

    schema = result_schema()
    return jsonschema.validators.validator_for(schema)(schema)


def model_info(
    model: ModelConfig, trainable_params: int | None, forward_flops: int | None
) -> dict[str, int | None]:
    """A model's size and FLOPs per sample: a shared ResNet's FLOPs from its spec, a zoo
    model's as the framework that built it counted them (``forward_flops``); null where no
    framework built it (a zoo model's cell skipped at plan time, or failed before)."""
    if model.zoo is None:
        spec = model.spec()
        return {
            "trainable_params": trainable_params or spec.trainable_params(),
            "spec_trainable_params": spec.trainable_params(),
            "forward_flops_per_sample": spec.forward_flops(),
            "train_flops_per_sample": spec.train_flops(),
        }
    return {
        "trainable_params": trainable_params,
        "forward_flops_per_sample": forward_flops,
        "train_flops_per_sample": forward_flops and TRAIN_TO_FORWARD_FLOPS * forward_flops,
    }


def make_result(
    cell: Cell,
    status: str,
    *,
    started_at: str,
    system: dict[str, Any],
    reason: str | None = None,
    measurement: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    collectives: dict[str, Any] | None = None,
    trainable_params: int | None = None,
    forward_flops: int | None = None,
    framework: str | None = None,
    log_tail: str | None = None,
    startup: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if status not in STATUSES:
        raise ValueError(f"status: {status!r} is not one of {list(STATUSES)}")
    result = {
        "schema_version": SCHEMA_VERSION,
        "cell": cell.to_dict(),
        "status": status,
        "reason": reason,
        "started_at": started_at,
        "finished_at": now_iso(),
        "framework": framework,
        "model_info": model_info(cell.model, trainable_params, forward_flops),
        "measurement": measurement,
        "training": training,
        "system": system,
        "log_tail": log_tail,
    }
    if collectives is not None:  # mode collectives only: the schema requires it there
        result["collectives"] = collectives
    if startup is not None:  # the runner's start-up phases (runner.startup)
        result["startup"] = startup
    return result


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """This process's umask, read without changing it where Linux tells it
    (``/proc/self/status``); elsewhere set and restored at once under a lock (a file another
    thread makes in between could get mode 0o666 otherwise). Read at each write, not
    cached: a test, or a process, may change its umask."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~current_umask()


@contextmanager
def atomic_file(path: Path) -> Iterator[IO[bytes]]:
    """Yield a temporary file beside ``path`` that replaces it only if the block succeeds;
    ``path`` then has :func:`file_mode` (mkstemp makes the temporary file ``0o600``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), file_mode())
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
    with atomic_file(path) as handle:
        handle.write(text.encode("utf-8"))


def cells_dir_of(result_path: str | Path) -> Path | None:
    """The ``<results>/cells`` folder a result lies under, or None."""
    return next((p for p in Path(result_path).parents if p.name == "cells"), None)


def archive_path(result_path: Path, result: dict[str, Any]) -> Path:
    """``<results>/runs/<cell_id>/<started_at>-<pid>-<status>.json`` beside ``<results>/cells/``."""
    cells_dir = cells_dir_of(result_path)
    if cells_dir is None:
        raise ValueError(f"result path {result_path} is not under a 'cells' folder")
    stamp = result["started_at"].replace(":", "").replace("+0000", "Z")
    cell_dir = cells_dir.parent / "runs" / result["cell"]["cell_id"]
    return cell_dir / f"{stamp}-{os.getpid()}-{result['status']}.json"


def write_result(path: str | Path, result: dict[str, Any]) -> Path:
    """Validate (see :func:`can_validate`), archive, then atomically publish a cell result."""
    path = Path(path)
    if can_validate():
        validate_result(result)
    write_json_atomic(archive_path(path, result), result)
    write_json_atomic(path, result)
    return path


def rewrite_result(path: str | Path, result: dict[str, Any]) -> Path:
    """Atomically replace a published result with an amended version of the same run.

    The run's archived copies under ``runs/`` (same start time and status, written by
    whichever process wrote the result first) are replaced too, so ``runs/`` keeps one file
    per run.
    """
    path = Path(path)
    if can_validate():
        validate_result(result)
    archive = archive_path(path, result)
    pattern = archive.name.replace(f"-{os.getpid()}-", "-*-")
    for copy in archive.parent.glob(pattern):
        write_json_atomic(copy, result)
    write_json_atomic(path, result)
    return path


def read_result(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        result = json.load(handle)
    validate_result(result)
    return result
