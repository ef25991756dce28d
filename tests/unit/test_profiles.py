"""The shipped Snakemake profiles: the SLURM profile's settings are not overridden by the
workflow profile (which Snakemake applies over it, key by key); it needs no edit (the
account and partition come from SBATCH_ACCOUNT / SBATCH_PARTITION, the command line or a
profile of one's own), and a placeholder left in a profile of one's own fails before any
job is submitted, with one line naming the key."""

from __future__ import annotations

import os
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
def test_a_placeholder_left_in_a_profile_of_one_s_own_names_its_key(key):
    with pytest.raises(ConfigError, match=f"default-resources.{key} is still CHANGE_ME"):
        check_default_resources(["tmpdir=system_tmpdir", f"{key}='CHANGE_ME'"])


def test_set_values_pass():
    check_default_resources(["slurm_account=proj42", "slurm_partition=gpu", "mem_mb=16000"])
    check_default_resources([])


def slurm_default_resources(monkeypatch, **environment: str) -> list[str]:
    """The shipped SLURM profile's default-resources as Snakemake reads them (YTE rendered)
    with only ``environment`` of the SBATCH_ variables set."""
    from snakemake.profiles import ProfileConfigFileParser

    for name in ("SBATCH_ACCOUNT", "SBATCH_PARTITION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with open(REPO / "slurm" / "config.yaml", encoding="utf-8") as stream:
        return ProfileConfigFileParser().parse(stream)["default-resources"]


def test_the_shipped_slurm_profile_holds_no_placeholder():
    assert "CHANGE_ME" not in (REPO / "slurm" / "config.yaml").read_text(encoding="utf-8")


def test_the_slurm_profile_takes_account_and_partition_from_sbatch_s_variables(monkeypatch):
    unset = slurm_default_resources(monkeypatch)
    assert sorted(unset) == ["mem_mb=16000", "runtime=60"]  # the plugin's own fallbacks
    given = slurm_default_resources(monkeypatch, SBATCH_ACCOUNT="proj42", SBATCH_PARTITION="gpu")
    assert sorted(given) == sorted([*unset, "slurm_account=proj42", "slurm_partition=gpu"])
    check_default_resources(given)


def test_the_shipped_slurm_profile_plans_a_dry_run_unedited(tmp_path):
    command = [sys.executable, "-m", "snakemake", "--profile", "slurm", "-n"]
    command += ["--config", f"results_dir={tmp_path}"]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SBATCH_")}
    run = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=300, env=environment
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert not [line for line in run.stderr.splitlines() if line.startswith("dpscale:")]
    assert "This was a dry-run" in run.stdout and "bench_cell" in run.stdout


def test_profile_slurm_outside_a_checkout_is_the_packaged_one(tmp_path, monkeypatch):
    """`dpscale run -- --profile slurm` from a folder without slurm/ (an installed package):
    Snakemake would find no profile there, so the packaged one is named; a folder's own
    profile, or a path, is left as given."""
    from dpscale.cli_workflow import packaged_profiles

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
    ["run", "report", "lock", "check-config", "report-path", "compare", "status", "rerun-failed"]
    + ["rerun"],
)
def test_each_subcommand_s_help_says_what_it_does_and_shows_an_example(command, capsys):
    from dpscale.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    usage, description = text.split("\n\n")[:2]
    assert usage.startswith(f"usage: dpscale {command}") and description.endswith(".")
    assert f"example: dpscale {command} " in text
