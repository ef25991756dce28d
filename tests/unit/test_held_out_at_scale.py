"""The communication model's held-out cells at scale (docs/decisions/held-out-cells-at-scale.md):
one at a time up to LEAVE_ONE_OUT_UP_TO multi-rank configurations per strategy and model, in
FOLDS folds above, folds from each configuration's own key; the forms' shared fits and the
compression's sampled intervals give what fitting and pricing one at a time gave."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpscale.analysis.laws import commmodel
from dpscale.analysis.laws.commmodel import compression, validation
from dpscale.plan.model_inputs import configured_links
from dpscale.plan.traffic import RingAllReduce
from dpscale.render import commmodel_plots
from helpers.window_rows import window_row

PARAMS = 11_000_000
NETWORKS = configured_links([{"name": "slow", "rate": "1gbit"}, {"name": "fast", "rate": "10gbit"}])
TRAFFIC = {"torch-ddp": RingAllReduce()}
# 7 multi-rank layouts x 8 batches: 56 multi-rank configurations, above the threshold
LAYOUTS = [
    (1, 1, "host"),
    (1, 2, "host"),
    (2, 1, "slow"),
    (2, 1, "fast"),
    (4, 1, "slow"),
    (4, 1, "fast"),
    (2, 2, "slow"),
    (2, 2, "fast"),
]
BATCHES = [1, 2, 3, 4, 6, 8, 12, 16]


def step_time(nodes: int, devices: int, network: str, batch: float) -> float:
    """An additive step: compute slowed by co-located ranks, plus a ring all-reduce."""
    world = nodes * devices
    colocated = world if network != "host" else devices
    compute = (1 + 0.15 * (colocated - 1)) * batch / 40.0 + 0.02
    if world == 1:
        return compute
    rate = {"slow": 0.6e9 / 8, "fast": 0.6e10 / 8, "host": 5e8}[network]
    hops = 2 * (world - 1)
    return compute + hops / world * 4 * PARAMS / rate + hops * 0.004


def windows(
    layouts: list[tuple[int, int, str]] = LAYOUTS,
    batches: list[int] = BATCHES,
    noise: float = 0.02,
    seed: int = 0,
) -> pd.DataFrame:
    """Two windows of every layout and batch, log-normal ``noise``."""
    random = np.random.default_rng(seed)
    rows = [
        window_row(
            nodes,
            devices,
            network,
            batch,
            step_time(nodes, devices, network, batch) * math.exp(noise * random.standard_normal()),
            window,
        )
        for nodes, devices, network in layouts
        for batch in batches
        for window in range(2)
    ]
    return pd.DataFrame(rows)


def analyse(frame: pd.DataFrame, forms=("additive",)):
    return commmodel.analyse(frame, {"m": PARAMS}, NETWORKS, TRAFFIC, None, forms)


def observations(frame: pd.DataFrame) -> pd.DataFrame:
    return commmodel.observations(frame, {"m": PARAMS})


def multi_rank(count: int) -> pd.DataFrame:
    """``count`` multi-rank configurations and one 1-rank one (observations' columns)."""
    keys = [(1, "host", 1, 1, 8)] + [(2, "slow", 2, 4, b) for b in range(1, count + 1)]
    return pd.DataFrame(keys, columns=validation.FOLD_KEY)


def test_the_threshold_switches_from_one_cell_at_a_time_to_folds():
    up_to = commmodel.LEAVE_ONE_OUT_UP_TO
    assert commmodel.cell_scheme(multi_rank(up_to)) == commmodel.LEAVE_ONE_CELL_OUT
    assert commmodel.cell_scheme(multi_rank(up_to + 1)) == commmodel.K_FOLD_OVER_CELLS
    assert f"{commmodel.FOLDS}-fold over cells" == commmodel.K_FOLD_OVER_CELLS
    # below it, one refit per configuration; above it, at most FOLDS refits
    assert len(validation.held_out_sets(multi_rank(up_to), commmodel.LEAVE_ONE_CELL_OUT)) == up_to
    many = validation.held_out_sets(multi_rank(10 * up_to), commmodel.K_FOLD_OVER_CELLS)
    assert len(many) == commmodel.FOLDS


def test_every_multi_rank_configuration_is_held_out_exactly_once():
    obs = observations(windows())
    multi = obs.index[obs["world_size"] > 1]
    assert len(multi) > commmodel.LEAVE_ONE_OUT_UP_TO
    sets = validation.held_out_sets(obs, commmodel.K_FOLD_OVER_CELLS)
    held = [index for part, _ in sets for index in part]
    assert sorted(held) == sorted(multi)  # each once: none twice, none left, no 1-rank cell
    assert all(len(part) > 0 for part, _ in sets)
    assert 2 <= len(sets) <= commmodel.FOLDS


def test_a_large_group_is_checked_in_folds_each_cell_predicted_without_itself():
    frame = windows()
    target = (frame["nodes"] == 2) & (frame["network"] == "slow") & (frame["devices_per_node"] == 1)
    target &= frame["batch_per_device"] == 8
    changed = frame.copy()
    changed.loc[target, "step_time_s"] *= 3.0
    groups, _, before, summary = analyse(frame)
    after = analyse(changed)[2]
    assert groups[0].cell_scheme == commmodel.K_FOLD_OVER_CELLS
    cells = before[before["scheme"] == commmodel.K_FOLD_OVER_CELLS]
    assert len(cells) == 56 and (cells["status"] == "ok").all()
    assert commmodel.LEAVE_ONE_CELL_OUT not in set(before["scheme"])
    assert commmodel.K_FOLD_OVER_CELLS in set(summary["scheme"])

    def row(table: pd.DataFrame) -> pd.Series:
        rows = table[
            (table["scheme"] == commmodel.K_FOLD_OVER_CELLS)
            & (table["nodes"] == 2)
            & (table["network"] == "slow")
            & (table["devices_per_node"] == 1)
            & (table["batch_per_device"] == 8)
        ]
        assert len(rows) == 1
        return rows.iloc[0]

    old, new = row(before), row(after)
    assert new["measured"] == pytest.approx(3 * old["measured"])
    assert new["predicted"] == old["predicted"]  # its fold's fit never saw it
    # the other folds' fits did see it: their predictions moved
    moved = (
        before.loc[before["scheme"] == commmodel.K_FOLD_OVER_CELLS, "predicted"].to_numpy()
        != after.loc[after["scheme"] == commmodel.K_FOLD_OVER_CELLS, "predicted"].to_numpy()
    )
    assert moved.sum() > 40


def test_a_small_group_still_leaves_one_cell_out():
    small = windows(LAYOUTS[:4], BATCHES[:5])  # 3 multi-rank layouts x 5 batches
    groups, _, table, _ = analyse(small)
    assert groups[0].cell_scheme == commmodel.LEAVE_ONE_CELL_OUT
    cells = table[table["scheme"] == commmodel.LEAVE_ONE_CELL_OUT]
    assert len(cells) == 15
    assert commmodel.K_FOLD_OVER_CELLS not in set(table["scheme"])


def test_folds_come_from_each_configurations_key_alone():
    obs = observations(windows()).reset_index(drop=True)
    folds = commmodel.cell_folds(obs)
    key = dict(zip(map(tuple, obs[validation.FOLD_KEY].to_numpy().tolist()), folds, strict=True))
    # the same folds in any row order
    shuffled = obs.sample(frac=1.0, random_state=3)
    assert (commmodel.cell_folds(shuffled) == folds.loc[shuffled.index]).all()
    # unrelated cells added (another layout, more batches) move no configuration's fold
    more = observations(windows([*LAYOUTS, (4, 2, "fast")], [*BATCHES, 24, 32]))
    common = 0
    for row, fold in zip(
        more[validation.FOLD_KEY].itertuples(index=False), commmodel.cell_folds(more), strict=True
    ):
        if tuple(row) in key:
            assert fold == key[tuple(row)]
            common += 1
    assert common == len(obs) < len(more)
    # a stable hash of the values as written, whatever their type: the same in every run
    assert commmodel.fold_of((2, "slow", 1, 2, 16)) == commmodel.fold_of(
        (2.0, "slow", 1.0, 2.0, 16.0)
    )
    assert [commmodel.fold_of((2, "slow", 1, 2, b), 10) for b in (1, 2, 4, 8)] == [5, 2, 8, 1]
    assert [commmodel.fold_of((2, "slow", 1, 2, b), 5) for b in (1, 2, 4, 8)] == [0, 2, 3, 1]


def test_the_predictions_and_the_lines_name_the_folds():
    groups, _, table, summary = analyse(windows())
    predict = {"nodes": [2, 4], "devices_per_node": [1], "batch_per_device": [5], "networks": []}
    rows = commmodel.predictions(groups, predict, [1], [5], summary=summary)
    inside = rows[rows["kind"] == "interpolates"]
    assert not inside.empty
    assert inside["validated_by"].str.contains(commmodel.K_FOLD_OVER_CELLS, regex=False).all()
    assert inside["validated_median_abs_error"].notna().all()
    lines = commmodel.summary_lines(groups, summary)
    assert any(line.startswith(f"torch-ddp m, {commmodel.K_FOLD_OVER_CELLS}") for line in lines)
    # the figure's cell panel takes either cell scheme; its title says which
    panel = commmodel_plots._panel_rows(table, commmodel.CELL_SCHEMES)
    assert set(panel["scheme"]) == {commmodel.K_FOLD_OVER_CELLS}
    assert commmodel_plots._scheme_words(panel) == commmodel.K_FOLD_OVER_CELLS


def test_forms_fitted_together_are_the_forms_fitted_one_by_one():
    obs = observations(windows(LAYOUTS[:5], BATCHES[:5], seed=2))
    links = commmodel.links_from_config(NETWORKS, None, "torch-ddp")
    forms = ("additive", "max", "pollux")
    together, failed = commmodel.fit_forms(obs, links, forms, None, TRAFFIC["torch-ddp"])
    assert list(together) == list(forms) and not failed
    for form in forms:
        alone = commmodel.fit_model(obs, links, form, traffic=TRAFFIC["torch-ddp"])
        assert np.array_equal(alone.theta, together[form].theta)
    # a form that cannot be fitted says why, in the order asked
    _, failed = commmodel.fit_forms(obs, links, ("buckets", "additive"), None, TRAFFIC["torch-ddp"])
    assert list(failed) == ["buckets"]


@pytest.mark.parametrize("batch", [16, 4])  # every sample within reach; some out of it
def test_the_compressions_sampled_ratios_are_those_priced_one_sample_at_a_time(batch):
    groups, *_ = analyse(windows(LAYOUTS[:5], BATCHES[:5], noise=0.05, seed=4), ("pollux",))
    fit = groups[0].fits["pollux"]
    frame = pd.DataFrame(
        {
            "nodes": [2, 1],
            "network": ["slow", "host"],
            "devices_per_node": [1, 1],
            "world_size": [2, 1],
            "batch_per_device": [batch, batch],
            "gradient_bytes": 4 * PARAMS,
        }
    )
    rows = fit.design(frame, emulation=False)
    multi, single = rows.take(slice(0, 1)), rows.take(slice(1, 2))
    thetas = compression.sampled_thetas(fit)
    assert thetas is not None
    thetas[:5, fit.parameters.names.index("g")] = 1.0  # g at its bound: the adding path
    many = compression._sampled_ratios(fit, thetas, multi, single)
    table = compression._compressed(multi)
    one = np.array(
        [
            compression._ratio(compression._efficiencies(fit.parameters.values(t), table, single))
            for t in thetas
        ]
    )
    assert (np.isinf(many) == np.isinf(one)).all()
    finite = np.isfinite(one)
    assert np.allclose(many[finite], one[finite], rtol=1e-12, atol=0)
    assert len(set(np.round(many[finite], 6))) > 200  # the samples do differ


def test_the_throughput_figure_shows_each_strategy_once_past_its_row_limit():
    def pair(strategy: str, model: str, configurations: int) -> SimpleNamespace:
        return SimpleNamespace(strategy=strategy, model=model, obs=range(configurations))

    few = [pair("a", f"m{i}", 10) for i in range(commmodel_plots.MAX_ROWS)]
    assert commmodel_plots._shown_groups(few) == few  # every pair up to the limit
    many = [pair(s, f"m{i}", 10 + (s == "b") * i) for s in "abc" for i in range(3)]
    shown = commmodel_plots._shown_groups(many)
    assert [(g.strategy, g.model) for g in shown] == [("a", "m0"), ("b", "m2"), ("c", "m0")]
