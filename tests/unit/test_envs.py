"""Framework environments: a post script's compiled wheels are cached outside the checkout,
keyed by the environment's files, so a fresh clone reuses them and an edited file never does."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpscale.launch.setup import envs


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


# -- lock files (dpscale lock) -------------------------------------------------------------

FROZEN = "numpy==2.1.0\npip==24.0\nhorovod @ file:///cache/horovod-0.28.1-cp311-linux.whl\n"


def built(tmp_path: Path, frozen: str = FROZEN) -> Path:
    """A fake complete environment that recorded ``frozen``."""
    prefix = tmp_path / "built" / "fw-x"
    prefix.mkdir(parents=True)
    (prefix / envs.COMPLETE_FLAG).write_text("x\n")
    (prefix / envs.FREEZE_FILE).write_text(frozen)
    return prefix


def test_without_a_lock_the_hash_is_the_requirements_and_post_script_s(envs_dir):
    files = envs.env_files("fw", envs_dir)
    assert files.lock is None and files.install == envs_dir / "fw.txt"
    assert envs.env_hash("fw", envs_dir) == envs.unlocked_hash("fw", envs_dir)


def test_a_lock_is_installed_instead_of_the_requirements_and_hashed(envs_dir, tmp_path):
    before = envs.env_folder_name("fw", envs_dir)
    wheels = envs.wheel_cache("fw", envs_dir)
    lock = envs.write_lock("fw", built(tmp_path), envs.lock_path("fw", envs_dir), envs_dir)
    assert lock == envs_dir / "fw.lock"
    files = envs.env_files("fw", envs_dir)
    assert files.install == lock and files.hashed == [envs_dir / "fw.txt", lock, files.post]
    assert envs.env_folder_name("fw", envs_dir) != before
    assert envs.wheel_cache("fw", envs_dir) == wheels  # the post script builds the same
    locked = envs.env_hash("fw", envs_dir)
    lock.write_text(lock.read_text() + "scipy==1.17.1\n")
    assert envs.env_hash("fw", envs_dir) != locked


def test_the_lock_leaves_what_this_machine_built_to_the_post_script(envs_dir, tmp_path):
    lock = envs.write_lock("fw", built(tmp_path), tmp_path / "locks" / "fw.lock", envs_dir)
    lines = lock.read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == ["numpy==2.1.0", "pip==24.0"]
    assert any(line.startswith("# left to fw.post.sh") and "horovod @" in line for line in lines)


def test_a_lock_in_the_configured_folder_is_used_only_with_that_folder(envs_dir, tmp_path):
    locks = tmp_path / "locks"
    lock = envs.write_lock("fw", built(tmp_path), envs.lock_path("fw", envs_dir, locks), envs_dir)
    assert envs.env_files("fw", envs_dir).lock is None
    assert envs.env_files("fw", envs_dir, locks).lock == lock


def test_a_lock_older_than_the_requirements_is_refused(envs_dir, tmp_path):
    envs.write_lock("fw", built(tmp_path), envs.lock_path("fw", envs_dir), envs_dir)
    (envs_dir / "fw.txt").write_text("numpy==2.2.0\n")
    with pytest.raises(envs.LockError, match="delete it"):
        envs.env_folder_name("fw", envs_dir)


def test_only_a_built_environment_can_be_locked(envs_dir, tmp_path):
    with pytest.raises(envs.LockError, match="not built"):
        envs.write_lock("fw", tmp_path / "nothing", tmp_path / "fw.lock", envs_dir)


def test_the_build_installs_the_lock(envs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DPSCALE_WHEEL_CACHE", str(tmp_path / "cache"))
    lock = envs.write_lock("fw", built(tmp_path), envs.lock_path("fw", envs_dir), envs_dir)
    installs: list[list[str]] = []

    def run(command: list[str], log, env: dict | None = None) -> None:
        if command[1:3] == ["-m", "venv"]:
            Path(command[3]).mkdir(parents=True)
        if "install" in command:
            installs.append(command)

    monkeypatch.setattr(envs, "_run", run)
    monkeypatch.setattr(envs, "_freeze", lambda python: FROZEN)
    prefix = tmp_path / "locked" / envs.env_folder_name("fw", envs_dir)
    with open(tmp_path / "build.log", "w") as log:
        envs.build_env("fw", prefix, envs_dir, log=log)
    assert installs and installs[0][-2:] == ["-r", str(lock)]
    assert envs.built_env_hash(prefix) == envs.env_hash("fw", envs_dir)


def test_a_second_build_of_one_environment_waits_and_finds_it_built(
    envs_dir, tmp_path, monkeypatch
):
    """Two processes (a test and a prebuild, two studies) building one environment: the
    second waits for the first's lock, then reuses its build instead of removing it as
    unfinished."""
    import threading

    venvs: list[str] = []
    first_inside, release = threading.Event(), threading.Event()

    def run(command: list[str], log, env: dict | None = None) -> None:
        if command[1:3] == ["-m", "venv"]:
            venvs.append(command[3])
            Path(command[3]).mkdir(parents=True)
            first_inside.set()
            assert release.wait(10)

    monkeypatch.setattr(envs, "_run", run)
    monkeypatch.setattr(envs, "_freeze", lambda python: "numpy==2.1.0\n")
    prefix = tmp_path / "built" / "fw-x"

    def build() -> None:
        with open(tmp_path / f"build-{threading.get_ident()}.log", "w") as log:
            envs.build_env("fw", prefix, envs_dir, log=log)

    first = threading.Thread(target=build)
    first.start()
    assert first_inside.wait(10)
    second = threading.Thread(target=build)
    second.start()
    second.join(0.5)
    assert second.is_alive()  # waiting on the lock, not building beside the first
    release.set()
    first.join(10)
    second.join(10)
    assert venvs == [str(prefix)] and (prefix / envs.READY_MARKER).is_file()
