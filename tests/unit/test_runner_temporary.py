"""A cell's processes keep Python's temporary files in the launch's scratch folder."""

from __future__ import annotations

import tempfile

import pytest

from dpscale.runner.temporary import SCRATCH_VARIABLE, keep_temporary_files_in_scratch


@pytest.fixture
def users_temporary(tmp_path, monkeypatch):
    """A process whose TMPDIR is the user's own folder, tempfile not asked yet."""
    folder = tmp_path / "users-tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return folder


def test_temporary_files_go_to_the_scratch_folder(tmp_path, monkeypatch, users_temporary):
    scratch = tmp_path / ".dpscale-cell-x"
    scratch.mkdir()
    monkeypatch.setenv(SCRATCH_VARIABLE, str(scratch))
    keep_temporary_files_in_scratch()
    with tempfile.NamedTemporaryFile(delete=False) as handle:
        pass
    assert handle.name.startswith(f"{scratch}/")
    assert not list(users_temporary.iterdir())


@pytest.mark.parametrize("scratch", [None, "missing"])
def test_without_a_scratch_folder_tmpdir_is_kept(tmp_path, monkeypatch, users_temporary, scratch):
    """Run by hand (no launcher) or with the folder gone: the user's TMPDIR, as before."""
    if scratch is None:
        monkeypatch.delenv(SCRATCH_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(SCRATCH_VARIABLE, str(tmp_path / scratch))
    keep_temporary_files_in_scratch()
    assert tempfile.gettempdir() == str(users_temporary)
