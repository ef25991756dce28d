"""The communication model of one study: fitted on the cells without a remedy, each remedy
learnt on top of that fit, both validated on held-out cells and used for predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from dpscale.analysis.laws.commmodel.analysis import GroupModel, analyse
from dpscale.analysis.laws.commmodel.prediction import predictions
from dpscale.analysis.laws.commmodel.remedy_fit import (
    fit_remedies,
    remedy_lines,
    remedy_predictions,
)
from dpscale.analysis.laws.commmodel.summary import summary_lines
from dpscale.analysis.results.rows import without_remedies


@dataclass
class StudyModel:
    groups: list[GroupModel]  # one per strategy and model
    windows: pd.DataFrame  # the windows it was fitted on (no remedy)
    parameters: pd.DataFrame
    validation: pd.DataFrame
    summary: pd.DataFrame
    predictions: pd.DataFrame
    remedies: pd.DataFrame
    remedy_validation: pd.DataFrame
    remedy_predictions: pd.DataFrame
    remedy_lines: list[str]  # the remedies in words
    lines: list[str]  # the model's errors in words, then the remedies'


def trainable_params(cells: pd.DataFrame) -> dict[str, int]:
    if "trainable_params" not in cells:
        return {}
    # a zoo model's count is null in cells no framework built it in (skipped at plan time)
    return cells.groupby("model")["trainable_params"].first().dropna().to_dict()


def study_model(
    windows: pd.DataFrame,
    cells: pd.DataFrame,
    comm_fits: pd.DataFrame,
    study: dict[str, Any],
    timeline: pd.DataFrame | None = None,
    replay: pd.DataFrame | None = None,
) -> StudyModel:
    """The model of a study's tables; ``study`` holds the config's links (``links``: the
    networks, plan.model_inputs.configured_links), ``predict`` (its ``networks`` as links too),
    devices_per_node, batch_sizes and ``traffic``, each strategy's (plan.traffic);
    ``timeline``: bucket_timeline.csv (the bucket form); ``replay``: gradient_replay.csv
    (each remedy's own work, measured alone)."""
    plain_windows = without_remedies(windows)
    params = trainable_params(without_remedies(cells))
    groups, parameters, validation, summary = analyse(
        plain_windows,
        params,
        study["links"],
        study["traffic"],
        without_remedies(comm_fits),
        timeline_table=timeline,
    )
    layouts = (study["predict"], study["devices_per_node"], study["batch_sizes"])
    fitted, remedies, remedy_validation = fit_remedies(groups, windows, cells, params, replay)
    remedy_table = remedy_predictions(fitted, *layouts)
    words = remedy_lines(remedy_table, remedies)
    return StudyModel(
        groups=groups,
        windows=plain_windows,
        parameters=parameters,
        validation=validation,
        summary=summary,
        predictions=predictions(groups, *layouts, summary=summary),
        remedies=remedies,
        remedy_validation=remedy_validation,
        remedy_predictions=remedy_table,
        remedy_lines=words,
        lines=summary_lines(groups, summary) + words,
    )
