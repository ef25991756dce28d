"""The communication model's step: fitted, validated on held-out cells, used for predictions,
the study's multi-node cells predicted through its own exported collectives logs, and the
published multi-GPU results predicted from a borrowed profile (rule comm_model in
workflow/rules/model.smk: one job, so one Python start per study for the three)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpscale.analysis.answers import exported_log_check as elc
from dpscale.analysis.answers import exported_log_summary as els
from dpscale.analysis.laws.commmodel.study import study_model
from dpscale.plan.link import links_of
from dpscale.plan.traffic import traffic_of
from dpscale.render import commmodel_plots
from dpscale.render.html import write_table_html
from dpscale.render.predictions_page import predictions_html
from dpscale.steps.io import figure_path, or_message, read_optional, write, write_lines

Files = Mapping[str, Any]

TABLES = (
    "parameters",
    "validation",
    "summary",
    "predictions",
    "remedies",
    "remedy_validation",
    "remedy_predictions",
)


def study_links(study: dict[str, Any]) -> dict[str, Any]:
    """plan.model_inputs' JSON with its links as plan.link.Link and its traffic as
    plan.traffic's again."""
    predict = {**study["predict"], "networks": links_of(study["predict"]["networks"])}
    links, traffic = links_of(study["links"]), traffic_of(study["traffic"])
    return {**study, "links": links, "predict": predict, "traffic": traffic}


def comm_model(inputs: Files, outputs: Files, params: Files) -> str:
    """The model (:func:`fit_comm_model`), then the exported-log check over the model's
    tables as written (:func:`exported_log_check`, its outputs named ``exported_*``)."""
    lines = [fit_comm_model(inputs, outputs, params)]
    check_inputs = {
        **{name: inputs[name] for name in ("cells", "collectives", "timeline")},
        **{name: outputs[name] for name in ("validation", "summary", "parameters")},
    }
    lines.append(exported_log_check(check_inputs, prefixed(outputs, "exported_"), params))
    return "\n".join(lines)


def prefixed(outputs: Files, prefix: str) -> dict[str, Any]:
    """The outputs named ``<prefix><name>``, as ``name``: one part's files of a job."""
    return {
        name.removeprefix(prefix): path for name, path in outputs.items() if name.startswith(prefix)
    }


def fit_comm_model(inputs: Files, outputs: Files, params: Files) -> str:
    """windows + cells (+ comm_fits, bucket timelines, gradient replays) -> the model's
    parameters, held-out validation, predictions, their HTML pages and figures."""
    model = study_model(
        read_optional(inputs["windows"]),
        read_optional(inputs["cells"]),
        read_optional(inputs["comm_fits"]),
        study_links(json.loads(params["study"])),
        read_optional(inputs.get("timeline")),
        read_optional(inputs.get("replay")),
    )
    for name in TABLES:
        write(getattr(model, name), outputs[name])
    write_lines(model.lines, outputs["top"])
    remedies = or_message(model.remedies, "remedies", "no remedy cells")
    write_table_html(remedies, outputs["remedies_html"], "Communication model: remedies")
    validation = model.validation
    chosen = validation[validation["chosen"].astype(bool)] if not validation.empty else validation
    pages = {
        "validation_html": (chosen, "held-out prediction errors"),
        "parameters_html": (model.parameters, "fitted parameters"),
    }
    if model.predictions.empty:
        pages["predictions_html"] = (model.predictions, "predictions")
    else:  # the reader's columns first; the rest in predictions.csv
        page = predictions_html(
            model.predictions, "Communication model: predictions", source=outputs["predictions"]
        )
        Path(outputs["predictions_html"]).write_text(page, encoding="utf-8")
    for name, (frame, title) in pages.items():
        shown = or_message(frame, "communication model", model.lines)
        write_table_html(shown, outputs[name], f"Communication model: {title}")
    commmodel_plots.validation_figure(validation, figure_path(outputs["validation_figure"]))
    commmodel_plots.throughput_figure(
        model.windows, model.groups, figure_path(outputs["throughput_figure"])
    )
    return f"[dpscale] comm model: {' '.join(model.lines)}"


def exported_log_check(inputs: Files, outputs: Files, params: Files) -> str:
    """cells + collectives + bucket timelines (+ the native validation) -> the study's
    multi-node cells predicted through its own collectives exported as nccl-tests logs
    (analysis.answers.exported_log_check), per cell and summarised, with their pages."""
    study = json.loads(params["study"])
    emulated = [link.name for link in links_of(study["links"]) if link.emulated]
    table = elc.check_cells(
        read_optional(inputs["cells"]),
        read_optional(inputs["collectives"]),
        read_optional(inputs["timeline"]),
        str(params["name"]),
        emulated,
    )
    summary = els.summarise(
        table,
        read_optional(inputs["validation"]),
        read_optional(inputs["summary"]),
        read_optional(inputs["parameters"]),
    )
    write(table, outputs["table"])
    write(summary, outputs["summary"])
    title = "Exported nccl-tests logs, end to end"
    write_table_html(summary, outputs["summary_html"], f"{title}: summary", els.PAGE_NOTE)
    write_table_html(table, outputs["table_html"], f"{title}: per cell", els.PAGE_NOTE)
    return f"[dpscale] exported-log check: {els.headline(summary)}"
