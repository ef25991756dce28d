"""Framework environments: a post script's compiled wheels are cached outside the checkout,
keyed by the environment's files, so a fresh clone reuses them and an edited file never does."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpscale.launch import envs


@pytest.fixture
def envs_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "envs"
    folder.mkdir()
    (folder / "fw.txt").write_text("# nothing to install\n")
    (folder / "fw.post.sh").write_text('echo "$DPSCALE_WHEELS"\n')
    return folder


def test_the_wheel_cache_is_keyed_by_the_environment_files(envs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DPSCALE_WHEEL_CACHE", str(tmp_path / "cache"))
    first = envs.wheel_cache("fw", envs_dir)
    assert first.parent == tmp_path / "cache"
    assert first.name.startswith(envs.env_folder_name("fw", envs_dir))
    assert envs.wheel_cache("fw", envs_dir) == first
    (envs_dir / "fw.post.sh").write_text('echo "$DPSCALE_WHEELS" # another build variable\n')
    assert envs.wheel_cache("fw", envs_dir) != first


def test_the_default_cache_is_the_user_s_not_the_checkout_s(envs_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("DPSCALE_WHEEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert envs.wheel_cache("fw", envs_dir).parent == tmp_path / "xdg" / "dpscale" / "wheels"


def test_the_post_script_is_told_its_wheel_cache(envs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DPSCALE_WHEEL_CACHE", str(tmp_path / "cache"))
    commands: list[tuple[list[str], dict | None]] = []

    def run(command: list[str], log, env: dict | None = None) -> None:
        commands.append((command, env))
        if command[1:3] == ["-m", "venv"]:
            Path(command[3]).mkdir(parents=True)

    monkeypatch.setattr(envs, "_run", run)
    monkeypatch.setattr(envs, "_freeze", lambda python: "numpy==2.1.0\ntorch==2.13.0\n")
    prefix = tmp_path / "built" / "fw-x"
    with open(tmp_path / "build.log", "w") as log:
        envs.build_env("fw", prefix, envs_dir, log=log)
    post = [env for command, env in commands if command[-1].endswith("fw.post.sh")]
    assert post and post[0]["DPSCALE_WHEELS"] == str(envs.wheel_cache("fw", envs_dir))
    assert (prefix / envs.READY_MARKER).is_file()


def test_a_built_environment_records_every_package_and_results_name_it(
    envs_dir, tmp_path, monkeypatch
):
    frozen = "numpy==2.1.0\ntorch==2.13.0\n"
    monkeypatch.setattr(
        envs,
        "_run",
        lambda command, log, env=None: (
            Path(command[3]).mkdir(parents=True) if command[1:3] == ["-m", "venv"] else None
        ),
    )
    monkeypatch.setattr(envs, "_freeze", lambda python: frozen)
    prefix = tmp_path / "built" / "fw-x"
    assert envs.freeze_hash(prefix) == "unknown"
    with open(tmp_path / "build.log", "w") as log:
        envs.build_env("fw", prefix, envs_dir, log=log)
    assert (prefix / envs.FREEZE_FILE).read_text() == frozen
    import hashlib

    assert envs.freeze_hash(prefix) == hashlib.sha256(frozen.encode()).hexdigest()
    # an environment built before it recorded its packages gets them at its next use
    (prefix / envs.FREEZE_FILE).unlink()
    with open(tmp_path / "build.log", "a") as log:
        envs.build_env("fw", prefix, envs_dir, log=log)
    assert (prefix / envs.FREEZE_FILE).read_text() == frozen
