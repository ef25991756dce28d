import datetime
import json
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ONE_PROCESS, REPO, make_cell
from dpscale.cli import main as cli
from dpscale.launch.kinds import kind
from dpscale.plan.config import config_schema
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import expand
from dpscale.plan.resnet_spec import DEPTHS
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.study_check import check_study

PRICES = {"currency": "EUR", "node_hour": {"cpu": 0.1}, "source": "a test", "date": "2026-11-01"}


def check(config):
    return plan_study(config, STRATEGIES)[0]


def test_default_config_is_valid_and_gets_defaults(default_config):
    del default_config["measure"]["timeout_s"]
    config = check(default_config)
    assert config["measure"]["timeout_s"] == 1800
    assert config["models"][0]["stem"] == "imagenet"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda c: c.update(strategies=["torch-dpp"]),
            f"strategies[0]: 'torch-dpp' is not allowed; allowed: {sorted(STRATEGIES)}",
        ),
        (
            lambda c: c["models"][0].update(name="resnet19"),
            "models[0].name: 'resnet19' is not allowed; allowed: [",
        ),
        (
            lambda c: c["models"][0].update(stem="mnist"),
            "models[0].stem: 'mnist' is not allowed; allowed: ['imagenet', 'cifar']",
        ),
        (
            lambda c: c.update(accelerator="tpu"),
            "accelerator: 'tpu' is not allowed; allowed: ['cpu', 'cuda']",
        ),
        (lambda c: c.update(batch_sizes=[0, 8]), "batch_sizes[0]: 0 is less than the minimum of 1"),
        (
            lambda c: c["measure"].update(windows=1),
            "measure.windows: 1 is less than the minimum of 2",
        ),
        (
            lambda c: c.update(precision="amp_bf16"),
            "precision: 'amp_bf16' needs accelerator 'cuda'",
        ),
        (
            lambda c: (c.update(accelerator="cuda"), c["measure"].update(memory_limit_mb=4096)),
            "measure.memory_limit_mb: 4096 is not allowed with accelerator 'cuda'",
        ),
        (
            lambda c: c.update(batchsize=[8]),
            "batchsize: unknown key; did you mean batch_sizes",
        ),
        (lambda c: c.pop("study"), "<config>: 'study' is a required property"),
        (
            lambda c: c["train"].update(cifar10_source="/nonexistent/cifar-10-python.tar.gz"),
            "train.cifar10_source: '/nonexistent/cifar-10-python.tar.gz' does not exist",
        ),
        (
            lambda c: c.update(env_locks="/nonexistent/locks"),
            "env_locks: '/nonexistent/locks' is not a folder; allowed: the folder",
        ),
        (
            lambda c: c["measure"].update(timeout_s=60, collective_timeout_s=60),
            "measure.collective_timeout_s: 60 must be below measure.timeout_s (60)",
        ),
        (
            lambda c: c.update(drift={"probes": 1}),
            "drift.probes: 1 draws no trace; allowed: 0 or at least 2",
        ),
        (
            lambda c: c.update(drift={"probes": 3, "cell": "torch-ddp/x"}),
            "drift.cell: 'torch-ddp/x' is not a runnable synthetic cell of this study; e.g. [",
        ),
        (
            lambda c: c.update(drift={"probes": -2}),
            "drift.probes: -2 is less than the minimum of 0",
        ),
        (
            lambda c: c.update(cost={**PRICES, "node_hour": {"cpu": -0.5}}),
            "cost.node_hour.cpu: -0.5 is less than the minimum of 0",
        ),
        (
            lambda c: c.update(cost={**PRICES, "node_hour": {"cpu": "cheap"}}),
            "cost.node_hour.cpu: 'cheap' is not of type 'number'",
        ),
        (
            lambda c: c.update(cost={**PRICES, "currency": "DOLLAR"}),
            "cost.currency: 'DOLLAR' is not an ISO 4217 currency code; allowed: e.g. USD",
        ),
        (
            lambda c: c.update(cost={**PRICES, "node_hour": {"cpu": 0.1, "cuda": 3.0}}),
            "cost.node_hour.cuda: no node of the study is 'cuda'; allowed: ['cpu']",
        ),
        (
            lambda c: c.update(cost={**PRICES, "network_hour": {"ib": 0.5}}),
            "cost.network_hour.ib: 'ib' is not a network of the study between nodes; allowed: [",
        ),
        (
            lambda c: c.update(cost={**PRICES, "date": "last week"}),
            "cost.date: 'last week' is not a date; allowed: YYYY-MM-DD",
        ),
        (
            lambda c: c.update(comm=["none", {"name": "powersgd", "rank": 0}]),
            "comm[1].rank: 0 is not allowed; allowed: an integer >= 1",
        ),
        (
            lambda c: c.update(comm=["none", "zip"]),
            "comm[1].name: 'zip' is not allowed; allowed: ['none', 'fp16', 'bf16', 'powersgd',",
        ),
        (
            lambda c: c.update(comm=[{"name": "fp16", "bucket_mb": -1}]),
            "comm[0].bucket_mb: -1 is not allowed; allowed: a number > 0",
        ),
        (
            lambda c: c.update(comm=[{"name": "2bit", "threshold": 0}]),
            "comm[0].threshold: 0 is not allowed; allowed: a number > 0",
        ),
        (
            lambda c: c.update(comm=[{"name": "fp16", "rank": 2}]),
            "comm[0].rank: only powersgd takes a rank; allowed: drop it",
        ),
        (
            lambda c: c.update(comm=["fp16", "fp16"]),
            "comm[1]: 'fp16' is listed twice; allowed: each remedy once",
        ),
        (lambda c: c.update(comm="fp16"), "comm: 'fp16' is not allowed; allowed: a non-empty"),
    ],
)
def test_bad_input_is_one_line_naming_field_and_allowed_values(default_config, edit, expected):
    edit(default_config)
    with pytest.raises(ConfigError) as error:
        check(default_config)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(expected), message


def test_a_price_list_with_an_unquoted_date_is_accepted(default_config):
    default_config["cost"] = {**PRICES, "date": datetime.date(2026, 11, 1)}
    assert check(default_config)["cost"]["date"] == "2026-11-01"


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "study.yaml"
    bad.write_text("study: broken\nstrategies: [torch-dp\nmodels: []\n")
    with pytest.raises(SystemExit) as stop:
        cli(["check-config", str(bad)])
    assert stop.value.code == (
        f"dpscale: config error: {bad}:3:7: YAML syntax error: expected ',' or ']', but got ':'"
    )


def test_a_study_file_is_checked_merged_over_the_default(capsys):
    cli(["check-config", str(REPO / "studies" / "post004_dataparallel.yaml")])
    assert capsys.readouterr().out.startswith("dpscale: config ok")


def test_collective_timeout_defaults_to_half_the_cell_timeout_at_most_300(default_config):
    for timeout, expected in ((60, 30), (1800, 300)):
        default_config["measure"]["timeout_s"] = timeout
        cells = expand(check(default_config), STRATEGIES)
        assert {cell.measure.collective_timeout_s for cell in cells} == {expected}
    default_config["measure"]["collective_timeout_s"] = 7
    cells = expand(check(default_config), STRATEGIES)
    assert {cell.measure.collective_timeout_s for cell in cells} == {7}


def test_matrix_keeps_impossible_cells_as_skipped(default_config):
    default_config["nodes"] = [1, 2]
    default_config["modes"] = ["synthetic"]
    default_config["controls"] = []
    cells = expand(check(default_config), STRATEGIES)
    # strategies x models x batches x devices x nodes
    assert (
        len(cells)
        == len(default_config["strategies"]) * 1 * len(default_config["batch_sizes"]) * 2 * 2
    )
    dp_multi = [
        c for c in cells if c.strategy == "torch-dp" and c.devices_per_node == 2 and c.nodes == 1
    ]
    assert all("one process" in c.skip_reason for c in dp_multi)
    dp_nodes = [c for c in cells if c.strategy == "torch-dp" and c.nodes == 2]
    assert all("cannot span 2 nodes" in c.skip_reason for c in dp_nodes)
    ddp = [c for c in cells if c.strategy == "torch-ddp"]
    assert not any(c.skip_reason for c in ddp)
    assert len({c.cell_id for c in cells}) == len(cells)


def test_repeats_are_separate_cells(default_config):
    default_config["measure"]["repeats"] = 3
    cells = expand(check(default_config), STRATEGIES)
    assert {c.repeat for c in cells if c.mode == "synthetic"} == {0, 1, 2}


@pytest.mark.parametrize("preset", sorted((REPO / "studies").glob("*.yaml")), ids=lambda p: p.stem)
def test_study_presets_are_valid_over_the_default(default_config, preset):
    merged = {**default_config, **yaml.safe_load(preset.read_text())}
    config = check(merged)
    assert config["study"] == preset.stem
    assert expand(config, STRATEGIES)


def test_comm_remedies_are_cells_across_processes_and_none_keeps_the_ids(default_config):
    default_config.update(strategies=["torch-ddp", "horovod-tf", "torch-dp"], nodes=[1])
    before = {c.cell_id: c for c in expand(check(default_config), STRATEGIES)}
    default_config["comm"] = ["none", "fp16", {"name": "powersgd", "rank": 1}, {"bucket_mb": 4}]
    after = {c.cell_id: c for c in expand(check(default_config), STRATEGIES)}
    assert set(before) <= set(after)
    assert all(before[k].to_json() == after[k].to_json() for k in before)
    remedied = [c for c in after.values() if not c.comm.is_default]
    assert remedied and all(c.world_size > 1 for c in remedied)  # one process: no traffic
    ids = {c.cell_id for c in remedied}
    assert "torch-ddp/resnet18-imagenet64-c10/synthetic-comm-powersgd-r1/n1-d2-b4-r0" in ids
    assert "horovod-tf/resnet18-imagenet64-c10/synthetic-comm-none-bucket4/n1-d2-b4-r0" in ids
    reasons = {(c.strategy, c.comm.key): c.skip_reason for c in remedied}
    assert reasons[("torch-ddp", "fp16")] is None
    assert reasons[("torch-ddp", "powersgd-r1")] is None
    assert reasons[("horovod-tf", "powersgd-r1")] == (
        "horovod-tf does not apply comm 'powersgd'; it applies: ['none', 'fp16']"
    )
    cell = next(c for c in remedied if c.strategy == "torch-ddp")
    assert type(cell).from_json(cell.to_json()) == cell


def test_a_remedy_limited_to_networks_runs_only_there_and_training_takes_train_comm(
    default_config,
):
    default_config.update(
        strategies=["torch-ddp"],
        nodes=[1, 2],
        devices_per_node=[1],
        networks=[{"name": "slow", "rate": "1gbit"}, {"name": "fast", "rate": "10gbit"}],
        modes=["synthetic", "train"],
        comm=["none", "fp16", {"name": "delayed-fp16", "networks": ["slow"]}],
    )
    default_config["train"].update(strategies=["torch-ddp"], nodes=[2], comm=["none", "fp16"])
    default_config["devices_per_node"] = [1, 2]
    default_config["train"]["devices_per_node"] = [1]
    cells = expand(check(default_config), STRATEGIES)
    assert {(c.nodes, c.devices_per_node) for c in cells if c.mode == "train"} == {(2, 1)}
    synthetic = {(c.network.name, c.comm.key) for c in cells if c.mode == "synthetic"}
    assert ("slow", "delayed-fp16") in synthetic and ("fast", "delayed-fp16") not in synthetic
    assert ("fast", "fp16") in synthetic
    trained = {c.comm.key for c in cells if c.mode == "train"}
    assert trained == {"none", "fp16"}


def test_a_powersgd_start_makes_training_cells_of_its_own_and_others_keep_their_params(
    default_config,
):
    default_config.update(strategies=["torch-ddp"], nodes=[1], devices_per_node=[2])
    default_config.update(modes=["synthetic", "train"], comm=["none", "powersgd"])
    default_config["train"].update(
        strategies=["torch-ddp"], comm=["powersgd", {"name": "powersgd", "start": 2}]
    )
    cells = expand(check(default_config), STRATEGIES)
    trained = {c.comm.key: c for c in cells if c.mode == "train" and c.world_size > 1}
    assert set(trained) == {"powersgd-r2", "powersgd-r2-s2"}
    assert "start" not in trained["powersgd-r2"].to_dict()["comm"]  # as stored cells read
    early = trained["powersgd-r2-s2"]
    assert early.to_dict()["comm"]["start"] == 2
    assert type(early).from_json(early.to_json()) == early
    assert {c.comm.key for c in cells if c.mode == "synthetic" and c.world_size > 1} == {
        "none",
        "powersgd-r2",
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"comm": [{"name": "delayed", "networks": ["nowhere"]}]},
            "comm[0].networks: 'nowhere' is not a network of this study; allowed: ['host']",
        ),
        (
            {"comm": [{"name": "delayed", "networks": "host"}]},
            "comm[0].networks: 'host' is not allowed; allowed: a non-empty list of network "
            "names ('host' for one node)",
        ),
        (
            {"comm": [{"name": "powersgd", "start": 2}]},
            "comm[0].start: only train.comm takes a start (synthetic and collectives cells "
            "time compressed steps from step 2); allowed: drop it",
        ),
        (
            {"train": {"comm": [{"name": "powersgd", "start": 0}]}},
            "train.comm[0].start: 0 is not allowed; allowed: an integer >= 2",
        ),
        (
            {"train": {"devices_per_node": [3]}},
            "train.devices_per_node[0]: 3 is not one of the study's devices_per_node; "
            "allowed: [1, 2]",
        ),
        (
            {"train": {"comm": ["fp32"]}},
            "train.comm[0].name: 'fp32' is not allowed; allowed: ['none', 'fp16', 'bf16', "
            "'powersgd', '2bit', 'delayed', 'delayed-fp16', 'push-pull']",
        ),
    ],
)
def test_bad_remedy_networks_and_train_comm_get_one_line(default_config, change, message):
    for key, value in change.items():
        if isinstance(value, dict):
            default_config[key].update(value)
        else:
            default_config[key] = value
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value) == message


def test_bf16_compression_is_skipped_on_cpu_with_torch_s_own_words(default_config):
    default_config.update(strategies=["torch-ddp"], nodes=[1], comm=["bf16"])
    cells = [
        c
        for c in expand(check(default_config), STRATEGIES)
        if c.world_size > 1 and c.strategy == "torch-ddp"
    ]
    assert cells and all(
        "BF16 all reduce communication hook required" in c.skip_reason for c in cells
    )


def test_collectives_time_a_remedy_only_where_it_changes_the_message(default_config):
    default_config.update(
        strategies=["torch-ddp"], nodes=[1], modes=["collectives"], comm=["fp16", "delayed"]
    )
    cells = {c.comm.key: c for c in expand(check(default_config), STRATEGIES) if c.world_size > 1}
    assert cells["fp16"].skip_reason is None
    assert "collectives cells time it as comm 'none' does" in cells["delayed"].skip_reason


def test_mxnet_servers_reach_only_mxnet_dist_cells_and_keep_cell_ids(default_config):
    default_config["strategies"] = ["torch-ddp", "mxnet-dist"]
    before = {c.cell_id: c for c in expand(check(default_config), STRATEGIES)}
    default_config["mxnet_servers"] = 3
    after = {c.cell_id: c for c in expand(check(default_config), STRATEGIES)}
    assert set(before) == set(after)
    mxnet_dist = STRATEGIES["mxnet-dist"]
    assert {
        mxnet_dist.option(c, "mxnet_servers") for c in after.values() if c.strategy == "mxnet-dist"
    } == {3}
    assert {c.options for c in after.values() if c.strategy == "torch-ddp"} == {()}
    assert all(before[k] == after[k] for k in after if after[k].strategy == "torch-ddp")
    cell = next(c for c in after.values() if c.strategy == "mxnet-dist")
    assert json.loads(cell.to_json())["mxnet_servers"] == 3  # beside the other fields
    assert type(cell).from_json(cell.to_json()) == cell


def test_a_cell_built_by_hand_gets_the_declared_default_of_its_strategy_s_option():
    cell = make_cell(strategy="mxnet-dist", devices=2)  # not by the matrix: no options
    assert STRATEGIES["mxnet-dist"].option(cell, "mxnet_servers") == 1
    argv = kind("mxnet").local(cell, ["/env/bin/python"], ["-m", "runner"])
    assert "--servers=1" in argv
    with pytest.raises(KeyError):
        STRATEGIES["torch-ddp"].option(cell, "mxnet_servers")


def test_a_strategy_s_own_option_is_validated_with_the_schema_it_declares(default_config):
    default_config["mxnet_servers"] = 0
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value) == "mxnet_servers: 0 is less than the minimum of 1"
    assert "mxnet_servers" in config_schema(STRATEGIES)["properties"]
    assert "mxnet_servers" not in config_schema()["properties"]  # declared by mxnet-dist only


def test_one_process_strategies_are_skipped_beyond_one_cpu_device(default_config):
    cells = expand(check(default_config), STRATEGIES)
    skipped = {c.strategy for c in cells if c.skip_reason and c.devices_per_node == 2}
    assert skipped == set(ONE_PROCESS)


def test_training_matrix_runs_one_baseline_per_seed(default_config):
    default_config["modes"] = ["train"]
    default_config["train"].update(strategies=["torch-ddp"], lr_rules=["none", "linear"])
    default_config["train"].update(seeds=[0, 1], batch_sizes=[32], base_batch=32)
    cells = expand(check(default_config), STRATEGIES)
    one = [c for c in cells if c.world_size == 1]
    two = [c for c in cells if c.world_size == 2]
    assert [(c.training.lr_rule, c.seed) for c in one] == [("none", 0), ("none", 1)]
    assert sorted((c.training.lr_rule, c.seed) for c in two) == [
        ("linear", 0),
        ("linear", 1),
        ("none", 0),
        ("none", 1),
    ]
    assert {c.mode_key for c in two} == {"train-digits-none", "train-digits-linear"}
    assert all(c.training.dataset_file == "data/digits-16.npz" for c in cells)
    assert len({c.cell_id for c in cells}) == len(cells)


def test_unknown_training_strategy_is_named(default_config):
    default_config["train"]["strategies"] = ["torch-ddp", "jax"]
    with pytest.raises(ConfigError, match=r"^train.strategies\[1\]: 'jax' is not allowed"):
        check(default_config)


@pytest.mark.parametrize(
    ("networks", "expected"),
    [
        ([{"name": "lan", "rate": "1gig"}], "networks[0].rate: '1gig' is not a rate; allowed"),
        ([{"name": "lan", "rate": "1gbit", "delay": "1s"}], "networks[0].delay: '1s'"),
        ([{"name": "Host", "rate": "1gbit"}], "networks[0].name: 'Host' is not allowed"),
        ([{"name": "host", "rate": "1gbit"}], "networks[0].name: 'host' is not allowed"),
        (["host", "lan"], "networks[1]: 'lan' is not one of 'host'"),
        ([{"name": "a", "rate": "1gbit", "interface": "ib0"}], "networks[0]: give either"),
        (
            [{"name": "a", "rate": "1gbit"}, {"name": "a", "rate": "2gbit"}],
            "networks: names must be",
        ),
    ],
)
def test_bad_networks_are_one_line_naming_the_entry(default_config, networks, expected):
    default_config["networks"] = networks
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value).startswith(expected), str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("rate", ["100Gbit", "100GBIT", "100gBit", "10Mbit", "2.5Kbit"])
def test_a_rate_s_unit_is_read_in_any_case_and_kept_in_lower_case(default_config, rate):
    """Issue 77: ``100Gbit`` means what tc's ``100gbit`` means; cells and tc see one spelling."""
    default_config.update(
        networks=["host", {"name": "fast", "rate": rate, "delay": "50us"}],
        predict={"networks": [{"name": "what", "bandwidth": rate.upper()}]},
    )
    checked = check(default_config)
    assert checked["networks"][1]["rate"] == rate.lower()
    assert checked["predict"]["networks"][0]["bandwidth"] == rate.lower()


@pytest.mark.parametrize(
    ("networks", "says"),
    [
        # case changes a delay's meaning (Ms: megaseconds) and bytes are not bits: refused
        ([{"name": "lan", "rate": "1gbit", "delay": "1MS"}], "networks[0].delay: '1MS' is not a"),
        ([{"name": "lan", "rate": "1gbit", "delay": "50US"}], "networks[0].delay: '50US' is not"),
        ([{"name": "lan", "rate": "10GB"}], "networks[0].rate: '10GB' is not a rate"),
        ([{"name": "lan", "rate": "10Gbps"}], "networks[0].rate: '10Gbps' is not a rate"),
    ],
)
def test_units_whose_case_is_ambiguous_are_still_refused(default_config, networks, says):
    default_config["networks"] = networks
    with pytest.raises(ConfigError, match=f"^{re.escape(says)}"):
        check(default_config)


@pytest.mark.parametrize("name", sorted(DEPTHS))
def test_a_bare_resnet_name_is_the_entry_with_the_schema_s_defaults(default_config, name):
    """Issue 77: ``models: [resnet50]`` is ``{name: resnet50}``, filled as any entry is."""
    default_config["models"] = [name]
    bare = check(default_config)
    default_config["models"] = [{"name": name, "stem": "imagenet", "image_size": 224}]
    assert bare == check(default_config)
    assert bare["models"] == [
        {"name": name, "stem": "imagenet", "image_size": 224, "classes": 1000}
    ]


@given(
    st.lists(
        st.sampled_from(sorted(DEPTHS)).flatmap(
            lambda name: st.sampled_from([name, {"name": name}, {"name": name, "classes": 10}])
        ),
        min_size=1,
        max_size=4,
    )
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_bare_names_and_mappings_mix_and_each_reads_as_its_mapping(entries):
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    config["models"] = entries
    written = [{"name": e} if isinstance(e, str) else e for e in entries]
    try:
        checked = check(config)
    except ConfigError as error:  # one entry twice: said as for the mappings
        config["models"] = written
        with pytest.raises(ConfigError, match=f"^{re.escape(str(error))}$"):
            check(config)
        return
    config["models"] = written
    assert checked == check(config)


@pytest.mark.parametrize(
    ("field", "entry", "says"),
    [
        (
            "models",
            "torchvision.vit_b_16",
            "models[0]: 'torchvision.vit_b_16' is not a model entry; allowed: one of ['resnet18',",
        ),
        (
            "models",
            "resnet19",
            "e.g. {name: resnet19, stem: imagenet, image_size: 224, classes: 1000}",
        ),
        (
            "train.models",
            "resnet18",
            "train.models[0]: 'resnet18' is not a model entry; allowed: a mapping, e.g. "
            "{name: resnet18, stem: imagenet, image_size: 32, classes: 10}",
        ),
    ],
)
def test_a_bare_name_that_is_not_unambiguous_shows_the_mapping(default_config, field, entry, says):
    if field == "models":
        default_config["models"] = [entry]
    else:
        default_config["train"]["models"] = [entry]
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_an_unknown_key_names_the_file_and_the_nearest_keys(tmp_path):
    """Issue 77: one line, the file given to check-config, the key, its nearest keys."""
    study = tmp_path / "study.yaml"
    study.write_text("study: typo\nbatch_size: [4]\n")
    with pytest.raises(SystemExit) as stop:
        cli(["check-config", str(study)])
    assert stop.value.code == (
        f"dpscale: config error: {study}: batch_size: unknown key; did you mean batch_sizes or "
        "controls_batch_sizes?"
    )
    study.write_text("study: typo\nmodels: [{name: resnet18, size: 32}]\n")
    with pytest.raises(SystemExit) as stop:
        cli(["check-config", str(study)])
    assert stop.value.code.startswith(f"dpscale: config error: {study}: models[0].size: unknown ")


def test_an_unknown_key_far_from_any_lists_the_allowed_keys_and_names_config_yaml(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text("study: typo\nzzzzqq: 1\n")
    with pytest.raises(ConfigError) as error:
        check_study([study], probe=False)
    assert str(error.value).startswith(f"{study}: zzzzqq: unknown key; allowed keys: ['accel")
    with pytest.raises(ConfigError) as error:  # --config's value over every file
        check_study([], {"measure": {"timeout": 5}}, probe=False)
    assert str(error.value) == ("--config: measure.timeout: unknown key; did you mean timeout_s?")


def test_networks_apply_to_cells_across_nodes_only(default_config):
    default_config.update(
        nodes=[1, 2],
        strategies=["torch-ddp"],
        modes=["synthetic"],
        networks=["host", {"name": "1gbe", "rate": "1gbit"}],
    )
    cells = expand(check(default_config), STRATEGIES)
    one = {c.network.name for c in cells if c.nodes == 1}
    two = {c.network.name for c in cells if c.nodes == 2}
    assert one == {"host"} and two == {"host", "1gbe"}
    emulated = next(c for c in cells if c.network.name == "1gbe")
    assert emulated.cell_id.split("/")[2] == "synthetic-net-1gbe"
    assert type(emulated).from_json(emulated.to_json()) == emulated


def test_adaptive_measuring_reaches_the_cells_and_is_checked(default_config):
    default_config["measure"].update(target_ci=0.02, max_windows=20)
    cells = expand(check(default_config), STRATEGIES)
    assert {(c.measure.target_ci, c.measure.max_windows) for c in cells} == {(0.02, 20)}
    one = next(c for c in cells if c.world_size == 1)
    assert one.measure.adaptive_kwargs(processes=1) == {"target_ci": 0.02, "max_windows": 20}
    assert one.measure.adaptive_kwargs(processes=2) == {}  # ranks would have to agree

    def agree(done: bool) -> bool:
        return done

    assert one.measure.adaptive_kwargs(processes=2, agree=agree) == {
        "target_ci": 0.02,
        "max_windows": 20,
        "world_size": 2,
        "agree": agree,
    }
    default_config["measure"].update(max_windows=2)
    with pytest.raises(ConfigError, match="^measure.max_windows: 2 is less than"):
        check(default_config)
    default_config["measure"].update(target_ci=None, max_windows=None)
    assert {c.measure.target_ci for c in expand(check(default_config), STRATEGIES)} == {None}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"torch": ""}, "interpreters.torch: '' should be non-empty"),
        ({"torch": []}, "interpreters.torch: [] should be non-empty"),
        ({"torch": ["apptainer", ""]}, "interpreters.torch[1]: '' should be non-empty"),
        (
            {"torch": 3},
            "interpreters.torch: 3 is not allowed; allowed: a string or a list of strings",
        ),
        (
            {"pytorch": "/sw/python3"},
            "interpreters: 'pytorch' is not an environment; "
            "allowed: ['mxnet', 'tf-horovod', 'torch']",
        ),
    ],
)
def test_a_bad_interpreter_value_is_one_line_naming_the_key(default_config, value, says):
    default_config["interpreters"] = value
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value) == says


@pytest.mark.parametrize(
    ("requirement", "version", "unmet"),
    [
        ("torch>=2.0", "2.13.0+cpu", False),
        ("torch>=2.0", "1.13.1", True),
        ("tensorflow>=2.9,<2.16", "2.15.1", False),
        ("tensorflow>=2.9,<2.16", "2.16.0rc1", True),
        ("mxnet>=1.9,<2", "1.9.1", False),
        ("mxnet>=1.9,<2", "2.0.0b1", True),
    ],
)
def test_an_adapter_s_version_bounds(requirement, version, unmet):
    from dpscale.plan.strategy import unmet as why_unmet

    reason = why_unmet(requirement, version)
    assert (reason is not None) == unmet
    if unmet:
        module = requirement.split(">")[0]
        assert reason == f"{module} {version} is not supported (dpscale drives {requirement})"


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda c: c.update(study="s" * 300), "study: 'sss"),
        (
            lambda c: c.update(networks=["host", {"name": "lan", "rate": "0mbit"}]),
            "networks[1].rate: '0mbit' is not a rate; allowed: a number above 0",
        ),
        (
            lambda c: c.update(predict={"networks": [{"name": "g0", "bandwidth": "0mbit"}]}),
            "predict.networks[0].bandwidth: '0mbit' is not a bandwidth; allowed: a number above 0",
        ),
        (lambda c: c.update(results_dir="/proc/nope"), "results_dir: '/proc/nope' cannot be"),
        (lambda c: c.update(env_dir="/proc/nope/envs"), "env_dir: '/proc/nope/envs' cannot be"),
    ],
)
def test_names_too_long_zero_rates_and_unwritable_folders_are_one_line(default_config, edit, says):
    edit(default_config)
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value).startswith(says) and "\n" not in str(error.value)


def test_the_folder_check_creates_nothing(default_config, tmp_path):
    default_config["results_dir"] = str(tmp_path / "a" / "b" / "results")
    check(default_config)
    assert list(tmp_path.iterdir()) == []


def test_oversubscribe_leaves_existing_cells_as_they_were_and_round_trips(default_config):
    """A cell's JSON is the workflow's params: a new default must not re-measure a study."""
    cells = expand(check(default_config), STRATEGIES)
    assert all("oversubscribe" not in json.loads(c.to_json())["measure"] for c in cells)
    default_config["measure"] = {"oversubscribe": True}
    crowded = expand(check(default_config), STRATEGIES)[0]
    assert json.loads(crowded.to_json())["measure"]["oversubscribe"] is True
    assert type(crowded).from_json(crowded.to_json()) == crowded


def test_the_schemas_remedy_text_is_the_declarations():
    """config.schema.yaml says what every remedy shares; each remedy's name, keys and words
    come from plan.remedies (one source), so a remedy declared there is described here."""
    from dpscale.plan.remedies import DECLARED, NO_REMEDY

    raw = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    text = config_schema()["properties"]["comm"]["description"]
    assert text.startswith(raw["properties"]["comm"]["description"].strip())
    for remedy in DECLARED:
        assert remedy.described() in text
        assert all(f"{param.name}: {param.words}" in text for param in remedy.params)
    # nor does the schema file describe a remedy again ("none" stays an English word there)
    written = raw["properties"]["comm"]["description"]
    again = [r.name for r in DECLARED if r.name != NO_REMEDY and f" {r.name}" in written]
    assert not again
