"""A communication model of a data-parallel step, fitted to the measured cells and used to
predict configurations that were not measured.

Step time of a configuration with N ranks, per-device batch b, c ranks sharing one machine:

    T_comp = (1 + sigma (c - 1)) b / v0 + t_c1        (the 1-rank throughput law, slowed
                                                       when ranks share cores and memory)
    T_net  = 2(N-1)/N S / beta + 2(N-1)(alpha_ref + alpha0)   (ring all-reduce of the fp32
                                                       gradients, S bytes; 0 for N = 1)
    T      = (T_comp^g + T_net^g)^(1/g)               (the overlap form)

Parameters (at most seven): v0 (1-rank img/s per device), t_c1 (the fixed time of a step),
sigma (compute slowdown per co-located rank: ranks of one machine share its caches and
memory bandwidth; near 0 on GPUs, one device per rank), alpha0 (a per-hop software latency
on top of the link's alpha_ref), eta (the fraction of a link's reference bandwidth the
framework's gradient all-reduce gets while training: beta = eta x reference), one bandwidth
per link without a reference, and g (the overlap exponent). The link is the intra-node one
for one-node cells, the study's network otherwise; its reference is the collective
benchmark's fitted alpha/beta (comm_fits.csv) when there is one, else the configured rate
and delay. Parameters no measurement informs are held fixed, as Pollux does: sigma = 0
without co-located ranks, alpha0 = 0 unless two different (N, reference bandwidth) pairs
separate it from eta, eta = 1 without a link that has a reference.

Overlap forms: ``additive`` (g = 1: the all-reduce waits for the backward pass), ``max``
(g -> infinity: it hides behind compute), ``pollux`` (g fitted in [1, 10]) and ``buckets``
(the mechanism, commmodel.buckets: the gradient buckets a one-rank cell recorded, served in
order behind the backward pass over min(link, host) bandwidth, without eta or g, with kappa,
the compute each GB sent takes on shared cores; fitted only where a timeline was
recorded). The form that predicts the most held-out configurations, then with the
smallest median error over them (every validation scheme pooled), is used for predictions (a
tie goes to fewer parameters), so the extra parameter g cannot win by fitting noise. Fits minimise
squared errors of log step times of configuration means; intervals are the delta method on
log T with the residual scatter added (95%, normal on the log scale).

Co-location c: emulated nodes share one computer, so c = world size on emulated networks and
devices per node elsewhere; predictions are for real clusters, c = devices per node.

Modules: inputs (links, observations), model (the equations), buckets (the bucket form),
fitting, validation (each multi-rank configuration held out one at a time, or in 5 folds
over cells in a group of more than 40: docs/decisions/held-out-cells-at-scale.md), analysis
(the forms fitted and chosen), prediction, curves, summary.
"""

from dpscale.analysis.laws.commmodel.analysis import (
    FORMS,
    PARAMETER_COLUMNS,
    GroupModel,
    analyse,
    fit_group,
    parameter_rows,
)
from dpscale.analysis.laws.commmodel.curves import model_curves
from dpscale.analysis.laws.commmodel.fitting import (
    MAX_EVALUATIONS,
    Z95,
    Fit,
    NotEnoughData,
    choose_parameters,
    fit_forms,
    fit_model,
    propagate,
    safe_exp,
)
from dpscale.analysis.laws.commmodel.inputs import (
    INTRA,
    OBS_COLUMNS,
    links_from_config,
    observations,
)
from dpscale.analysis.laws.commmodel.model import (
    MIN_STEP,
    Design,
    Parameters,
    combine,
    design,
    parts,
    step_seconds,
)
from dpscale.analysis.laws.commmodel.prediction import (
    PREDICTION_COLUMNS,
    break_even,
    predicted_networks,
    predictions,
)
from dpscale.analysis.laws.commmodel.summary import summary_lines
from dpscale.analysis.laws.commmodel.validation import (
    BASELINE,
    BASELINE_FORM,
    CELL_SCHEMES,
    FEWEST_RANKS,
    FOLDS,
    K_FOLD_OVER_CELLS,
    LEAVE_ONE_CELL_OUT,
    LEAVE_ONE_NETWORK_OUT,
    LEAVE_ONE_OUT_UP_TO,
    SUMMARY_COLUMNS,
    VALIDATION_COLUMNS,
    cell_folds,
    cell_scheme,
    fold_of,
    held_out_by_form,
    held_out_predictions,
    layout_law_baseline,
    summarise,
    window_cv,
)
from dpscale.plan.link import Link

__all__ = [
    "BASELINE",
    "BASELINE_FORM",
    "CELL_SCHEMES",
    "FEWEST_RANKS",
    "FOLDS",
    "FORMS",
    "INTRA",
    "K_FOLD_OVER_CELLS",
    "LEAVE_ONE_CELL_OUT",
    "LEAVE_ONE_NETWORK_OUT",
    "LEAVE_ONE_OUT_UP_TO",
    "MAX_EVALUATIONS",
    "MIN_STEP",
    "OBS_COLUMNS",
    "PARAMETER_COLUMNS",
    "PREDICTION_COLUMNS",
    "SUMMARY_COLUMNS",
    "VALIDATION_COLUMNS",
    "Z95",
    "Design",
    "Fit",
    "GroupModel",
    "Link",
    "NotEnoughData",
    "Parameters",
    "analyse",
    "break_even",
    "cell_folds",
    "cell_scheme",
    "choose_parameters",
    "combine",
    "design",
    "fit_forms",
    "fit_group",
    "fit_model",
    "fold_of",
    "held_out_by_form",
    "held_out_predictions",
    "layout_law_baseline",
    "links_from_config",
    "model_curves",
    "observations",
    "parameter_rows",
    "parts",
    "predicted_networks",
    "predictions",
    "propagate",
    "safe_exp",
    "step_seconds",
    "summarise",
    "summary_lines",
    "window_cv",
]
