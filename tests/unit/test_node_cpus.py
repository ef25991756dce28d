"""Each device's rank on SLURM asks the node's CPUs per device where the study's `cluster`
section gives the node's CPUs (cluster.cpus_per_node), and check-config and status say what
it asks and why."""

from __future__ import annotations

import pytest
import yaml

from dpscale import cli
from dpscale.launch.slurm.resources import cell_resources
from dpscale.plan.config_rules import node_cpus_words
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

GPU_STUDY = {
    "study": "gpus",
    "strategies": ["torch-ddp", "torch-dp"],
    "models": [{"name": "resnet18", "stem": "cifar", "image_size": 32, "classes": 10}],
    "batch_sizes": [32],
    "accelerator": "cuda",
    "modes": ["synthetic"],
    "devices_per_node": [1, 2, 4],
    "nodes": [1],
}


def planned(default_config, **cluster):
    return plan_study({**default_config, **GPU_STUDY, "cluster": cluster}, STRATEGIES)


def asked(config, cells, strategy: str, devices: int) -> int:
    cell = next(c for c in cells if c.strategy == strategy and c.devices_per_node == devices)
    return cell_resources(cell, config["cluster"])["cpus_per_task"]


def test_the_node_s_cpus_are_shared_by_the_study_s_largest_node(default_config):
    config, cells = planned(default_config, cpus_per_node=72)
    assert config["cluster"]["cpus_per_device"] == 18  # 72 CPUs / 4 devices per node
    assert [asked(config, cells, "torch-ddp", d) for d in (1, 2, 4)] == [18, 18, 18]
    assert asked(config, cells, "torch-dp", 4) == 72  # one process drives the node's 4
    assert node_cpus_words(config) == (
        "on SLURM each device's rank asks 18 CPUs "
        "(cluster.cpus_per_node 72 / 4 devices per node, the study's most)"
    )


def test_without_the_node_s_cpus_a_rank_asks_threads_per_device(default_config):
    config, cells = planned(default_config)
    assert config["cluster"]["cpus_per_device"] is None
    assert asked(config, cells, "torch-ddp", 4) == config["threads_per_device"] == 1
    assert node_cpus_words(config).startswith("on SLURM each device's rank asks 1 CPU (thread")


def test_a_cpus_per_device_given_is_kept_within_the_node(default_config):
    config, cells = planned(default_config, cpus_per_node=72, cpus_per_device=8)
    assert asked(config, cells, "torch-ddp", 4) == 8
    assert node_cpus_words(config).endswith("asks 8 CPUs (cluster.cpus_per_device)")
    with pytest.raises(ConfigError, match=r"^cluster.cpus_per_device: 20 x 4 devices per node"):
        planned(default_config, cpus_per_node=72, cpus_per_device=20)
    with pytest.raises(ConfigError, match=r"^cluster.cpus_per_node: 2 is fewer than"):
        planned(default_config, cpus_per_node=2)


def test_check_config_and_status_print_what_a_rank_asks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "gpus.yaml"
    text = {**GPU_STUDY, "results_dir": str(tmp_path / "results"), "cluster": {"cpus_per_node": 32}}
    study.write_text(yaml.safe_dump(text), encoding="utf-8")
    words = "on SLURM each device's rank asks 8 CPUs (cluster.cpus_per_node 32 / 4 devices"
    cli.main(["check-config", str(study)])
    assert capsys.readouterr().out.splitlines()[1].startswith(f"dpscale: {words}")
    cli.main(["status", str(study)])
    assert capsys.readouterr().out.splitlines()[-1].startswith(words)
