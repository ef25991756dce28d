"""Control cells: what a study asks for, which cells they copy, what each strategy runs, and
one line for what cannot be asked (plan.controls)."""

import copy

import pytest

from dpscale.plan.cell import Cell
from dpscale.plan.controls import BARRIER, FULL, LOCAL
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES


def planned(config):
    return plan_study(config, STRATEGIES)[1]


@pytest.fixture
def with_controls(default_config):
    config = copy.deepcopy(default_config)
    config["controls"] = [LOCAL, BARRIER]
    config["controls_batch_sizes"] = None  # every batch size
    return config


def test_every_multi_process_layout_gets_each_control_and_nothing_else_changes(
    default_config, with_controls
):
    before = {c.cell_id: c for c in planned({**default_config, "controls": []})}
    after = {c.cell_id: c for c in planned(with_controls)}
    assert set(before) <= set(after)
    assert all(after[i] == cell for i, cell in before.items())  # the same cells, params too
    added = [after[i] for i in set(after) - set(before)]
    synthetic = [c for c in before.values() if c.mode == "synthetic" and not c.skip_reason]
    layouts = [c for c in synthetic if c.world_size > 1]
    split = {c.strategy for c in layouts}
    singles = [c for c in synthetic if c.world_size == 1 and c.strategy in split]
    assert len(added) == 2 * len(layouts) + len(singles)
    for cell in added:
        assert cell.control in (LOCAL, BARRIER)
        assert cell.cell_id.split("/")[2] == f"control-{cell.control}"
        original = before[cell.cell_id.replace(f"control-{cell.control}", "synthetic")]
        assert not original.skip_reason
        assert original.world_size > 1 or cell.control == LOCAL  # one device: its own exchange


def test_a_layouts_controls_run_right_after_it(with_controls):
    order = [c.cell_id for c in planned(with_controls)]
    for position, cell_id in enumerate(order):
        if "/control-" in cell_id:
            source = cell_id.split("/")
            source[2] = "synthetic"
            before = order[:position]
            assert "/".join(source) in before[-2:], cell_id


def test_a_strategy_that_declares_no_control_skips_it_with_why(with_controls):
    with_controls["accelerator"] = "cuda"  # torch-dp's two-device cell runs on a GPU node
    controls = [c for c in planned(with_controls) if c.control != FULL]
    torch_dp = [c for c in controls if c.strategy == "torch-dp"]
    assert torch_dp and all("DataParallel" in c.skip_reason for c in torch_dp)
    ddp = [c for c in controls if c.strategy == "torch-ddp"]
    assert ddp and not any(c.skip_reason for c in ddp)


def test_a_control_cell_reads_back_as_itself_and_an_ordinary_one_as_before(with_controls):
    for cell in planned(with_controls):
        assert Cell.from_json(cell.to_json()) == cell
        assert ("control" in cell.to_dict()) == (cell.control != FULL)
        assert "interventions" not in cell.to_dict()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda c: c.update(controls=["local", "none"]),
            "controls[1]: 'none' is not allowed; allowed: ['local', 'barrier']",
        ),
        (
            lambda c: c.update(controls=["local"], devices_per_node=[1]),
            "controls: ['local'] needs a runnable layout of more than one process",
        ),
        (
            lambda c: c.update(
                controls=["local"],
                strategies=["torch-dp", "torch-ddp"],
                nodes=[1],
                devices_per_node=[2],
            ),
            "controls: a layout's loss is measured against one device's step",
        ),
        (
            lambda c: c.update(
                controls=["barrier"], strategies=["torch-dp", "mxnet-device"], accelerator="cuda"
            ),
            "controls: 'barrier' is run by none of this study's multi-process strategies "
            "['mxnet-device', 'torch-dp']; strategies that run it: ['horovod-tf', "
            "'mxnet-dist', 'torch-ddp']",
        ),
        (
            lambda c: c.update(controls=["local"], controls_batch_sizes=[8]),
            "controls_batch_sizes: [8] are not among batch_sizes; allowed: a subset of [4, 16, 32]",
        ),
        (
            lambda c: c.update(controls=["local"], controls_batch_sizes="smallest"),
            "controls_batch_sizes: 'smallest' is not allowed; allowed:",
        ),
        (
            lambda c: c.update(controls=["local"], modes=["train"]),
            "controls: ['local'] split synthetic cells; modes ['train'] has none",
        ),
        (
            lambda c: c.update(interventions={"slow_rank": {"rank": 2, "cpu_fraction": 0.5}}),
            "interventions.slow_rank.rank: 2 is not a rank of this study's layouts (at most 2",
        ),
        (
            lambda c: c.update(interventions={"slow_rank": {"rank": 1, "cpu_fraction": 1.5}}),
            "interventions.slow_rank.cpu_fraction: 1.5 is greater than or equal to the maximum",
        ),
    ],
)
def test_bad_controls_get_one_line_naming_the_field(default_config, edit, expected):
    config = copy.deepcopy(default_config)
    edit(config)
    with pytest.raises(ConfigError) as error:
        planned(config)
    assert str(error.value).startswith(expected), str(error.value)
    assert "\n" not in str(error.value)


def test_interventions_ride_on_every_cell_and_back(default_config):
    default_config["interventions"] = {
        "slow_rank": {"rank": 1, "cpu_fraction": 0.5},
        "cpus": [0],
    }
    for cell in planned(default_config):
        assert cell.interventions.slow_rank == 1
        assert cell.interventions.cpus == (0,)
        assert Cell.from_json(cell.to_json()) == cell


def test_adding_a_strategy_control_is_its_adapter_alone():
    declared = {name: [c.name for c in s.controls] for name, s in STRATEGIES.items()}
    assert declared["torch-ddp"] == [LOCAL, BARRIER]
    assert declared["horovod-tf"] == [LOCAL, BARRIER]
    assert declared["mxnet-dist"] == [LOCAL, BARRIER]
    for name, strategy in STRATEGIES.items():
        for control in (LOCAL, BARRIER):
            reason = strategy.control_skip_reason(control)
            assert (reason is None) == (control in declared[name]), name


def test_controls_run_only_at_the_batch_sizes_asked(with_controls):
    with_controls["controls_batch_sizes"] = [32]
    controls = [c for c in planned(with_controls) if c.control != FULL]
    assert controls and {c.batch_per_device for c in controls} == {32}


def test_largest_runs_the_controls_at_the_studys_largest_batch(with_controls):
    with_controls["controls_batch_sizes"] = "largest"
    controls = [c for c in planned(with_controls) if c.control != FULL]
    assert {c.batch_per_device for c in controls} == {max(with_controls["batch_sizes"])}


def test_the_default_studys_auto_splits_where_it_can_and_asks_nothing_elsewhere(default_config):
    assert default_config["controls"] == "auto"
    cells = planned(default_config)
    controls = [c for c in cells if c.control != FULL]
    assert {c.control for c in controls} == {LOCAL, BARRIER}
    assert {c.batch_per_device for c in controls} == {max(default_config["batch_sizes"])}
    one_device = {**default_config, "devices_per_node": [1]}  # nothing to split: no error
    assert all(c.control == FULL for c in planned(one_device))
