"""The shipped Snakemake profiles: the SLURM profile's settings are not overridden by the
workflow profile (which Snakemake applies over it, key by key), and its placeholders fail
before any job is submitted, with one line naming the key."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from dpscale.plan.errors import ConfigError
from dpscale.plan.profile import check_default_resources


def profile(name: str) -> dict:
    return yaml.safe_load((REPO / name / "config.yaml").read_text(encoding="utf-8"))


def test_the_workflow_profile_overrides_nothing_the_slurm_profile_sets():
    default, slurm = profile("profiles/default"), profile("slurm")
    overridden = sorted(key for key in set(default) & set(slurm) if default[key] != slurm[key])
    assert overridden == [], f"profiles/default overrides the SLURM profile's {overridden}"
    assert slurm["printshellcmds"] is True


@pytest.mark.parametrize("key", ["slurm_account", "slurm_partition"])
def test_a_placeholder_names_its_key(key):
    with pytest.raises(ConfigError, match=f"default-resources.{key} is still CHANGE_ME"):
        check_default_resources(["tmpdir=system_tmpdir", f"{key}='CHANGE_ME'"])


def test_set_values_pass():
    check_default_resources(["slurm_account=proj42", "slurm_partition=gpu", "mem_mb=16000"])
    check_default_resources([])


def test_the_shipped_slurm_profile_stops_a_dry_run_with_one_line(tmp_path):
    command = [sys.executable, "-m", "snakemake", "--profile", "slurm", "-n"]
    command += ["--config", f"results_dir={tmp_path}"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    errors = [line for line in run.stderr.splitlines() if line.startswith("dpscale:")]
    assert run.returncode != 0
    assert errors == [
        "dpscale: config error: profile default-resources.slurm_account is still CHANGE_ME: "
        "set it to your SLURM account (sacctmgr show assoc user=$USER), or delete the line to "
        "let the SLURM executor plugin guess it from your past jobs in the profile's "
        "config.yaml (shipped as slurm/config.yaml)"
    ]
    assert "Traceback" not in run.stderr
    assert not any(tmp_path.iterdir()), "a folder was made before the error"


def test_profile_slurm_outside_a_checkout_is_the_packaged_one(tmp_path, monkeypatch):
    """`dpscale run -- --profile slurm` from a folder without slurm/ (an installed package):
    Snakemake would find no profile there, so the packaged one is named; a folder's own
    profile, or a path, is left as given."""
    from dpscale.cli import packaged_profiles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    packaged = str(REPO / "slurm")
    assert packaged_profiles(["--profile", "slurm", "-n"], REPO) == ["--profile", packaged, "-n"]
    assert packaged_profiles(["--profile=slurm"], REPO) == [f"--profile={packaged}"]
    assert packaged_profiles(["--profile", "mine"], REPO) == ["--profile", "mine"]
    (tmp_path / "slurm").mkdir()
    assert packaged_profiles(["--profile", "slurm"], REPO) == ["--profile", "slurm"]


@pytest.mark.parametrize(
    "command",
    ["run", "report", "lock", "check-config", "report-path", "compare", "status", "rerun-failed"],
)
def test_each_subcommand_s_help_says_what_it_does_and_shows_an_example(command, capsys):
    from dpscale.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    usage, description = text.split("\n\n")[:2]
    assert usage.startswith(f"usage: dpscale {command}") and description.endswith(".")
    assert f"example: dpscale {command} " in text
