import json
import os
import stat

import jsonschema
import pytest

from conftest import make_cell
from dpscale.plan.result import (
    current_umask,
    make_result,
    now_iso,
    read_result,
    result_schema,
    write_json_atomic,
    write_result,
)
from dpscale.runner.timing import throughput_measurement


def ok_result(cell):
    measurement = throughput_measurement([1.0, 1.1, 0.9], 2, cell.batch_per_device, cell.world_size)
    return make_result(
        cell,
        "ok",
        started_at=now_iso(),
        system={"host": "h", "cpu_model": "c", "python": "3.11"},
        measurement=measurement,
    )


def test_ok_result_round_trips(tmp_path):
    cell = make_cell()
    path = cell.result_path(tmp_path)
    write_result(path, ok_result(cell))
    assert read_result(path)["measurement"]["summary"]["img_s"]["n"] == 3
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_not_ok_needs_a_reason():
    cell = make_cell()
    result = make_result(
        cell,
        "failed",
        started_at=now_iso(),
        system={"host": "h", "cpu_model": "c", "python": "3"},
        reason="",
    )
    with pytest.raises(jsonschema.ValidationError):
        write_result("/nonexistent/cells/x.json", result)


def test_ok_synthetic_needs_a_measurement(tmp_path):
    cell = make_cell()
    result = ok_result(cell)
    result["measurement"] = None
    with pytest.raises(jsonschema.ValidationError):
        write_result(cell.result_path(tmp_path), result)


def test_unknown_status_is_rejected():
    with pytest.raises(ValueError, match="status"):
        make_result(make_cell(), "done", started_at=now_iso(), system={})


def test_rewrite_keeps_every_earlier_run_and_other_cells(tmp_path):
    first, other = make_cell(batch=8), make_cell(batch=16)
    write_result(first.result_path(tmp_path), ok_result(first))
    write_result(other.result_path(tmp_path), ok_result(other))
    again = ok_result(first)
    again["started_at"] = "2099-01-01T00:00:00+00:00"
    write_result(first.result_path(tmp_path), again)
    assert json.loads(first.result_path(tmp_path).read_text())["started_at"].startswith("2099")
    archived = list((tmp_path / "runs" / first.cell_id).iterdir())
    assert len(archived) == 2
    assert read_result(other.result_path(tmp_path))["cell"]["batch_per_device"] == 16


@pytest.fixture
def umask():
    """Set the process's umask for one test; the one before is restored after it."""
    before = os.umask(0o022)
    os.umask(before)
    yield os.umask
    os.umask(before)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("mask", "expected"),
    [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
    ids=["umask-022", "umask-077", "umask-002"],
)
def test_results_follow_the_umask(tmp_path, umask, mask, expected):
    """A result, its copy under runs/ and a second measurement (``.again.json``) get
    0o666 less the umask, as a plain open() would give them, not mkstemp's 0o600."""
    umask(mask)
    cell = make_cell()
    path = write_result(cell.result_path(tmp_path), ok_result(cell))
    again = path.with_name(f"{cell.cell_id.rsplit('/', 1)[-1]}.again.json")
    write_json_atomic(again, ok_result(cell))
    (archived,) = (tmp_path / "runs" / cell.cell_id).iterdir()
    assert [mode(p) for p in (path, archived, again)] == [expected] * 3


def test_the_umask_is_read_without_being_changed(umask):
    umask(0o027)
    assert current_umask() == 0o027
    assert os.umask(0o027) == 0o027  # still what the test set


def test_the_umask_is_read_without_proc(umask, monkeypatch):
    """Where /proc/self/status does not say it (not Linux), the umask is set and restored."""
    import dpscale.plan.result as result_module

    def no_proc(*args, **kwargs):
        raise FileNotFoundError("/proc/self/status")

    monkeypatch.setattr(result_module, "open", no_proc, raising=False)
    umask(0o007)
    assert current_umask() == 0o007
    assert os.umask(0o007) == 0o007


def test_the_result_schema_is_a_valid_schema_of_its_draft():
    """Checked here once: the validator every launcher and aggregate makes skips it."""
    schema = result_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
