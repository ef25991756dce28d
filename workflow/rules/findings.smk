# The answer first: findings (one row per strategy x model x network x layout, with a verdict),
# the source post beside this run, the answers' figures and model FLOPs utilisation.
# "0. Findings" sorts first among the report's categories (the report orders them by name).


rule cost:
    """Cost per layout and cost to a target accuracy, from cells and config cost prices."""
    input:
        **training_tables(with_runs=True),
        cells=f"{TABLES}/cells.csv",
    output:
        table=f"{TABLES}/cost.csv",
        to_target=f"{TABLES}/cost_to_target.csv",
        html=report(
            f"{TABLES}/cost.html",
            caption="../../report/cost.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "cost per layout"},
        ),
    log:
        f"{LOGS}/cost.log",
    localrule: True
    params:
        prices=json.dumps(config["cost"]),
        accelerator=config["accelerator"],
        title=f"Cost: study {config['study']}",
    script:
        "../scripts/step.py"


rule remedies:
    """Each communication remedy beside no remedy, and its accuracy cost, from the tables."""
    input:
        **{
            k: v
            for k, v in training_tables(with_runs=True).items()
            if k == "training_runs"
        },
        scaling=f"{TABLES}/scaling.csv",
        cells=f"{TABLES}/cells.csv",
        break_even=f"{TABLES}/break_even.csv",
        collectives=rules.collectives.output.table,
    output:
        table=f"{TABLES}/remedies.csv",
        accuracy=f"{TABLES}/remedies_accuracy.csv",
        top=f"{TABLES}/remedies_top.json",
        html=page(
            f"{TABLES}/remedies.html",
            f"{TABLES}/remedies.csv",
            f"{TABLES}/remedies_accuracy.csv",
            caption="../../report/remedies.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "what helps when the network is too slow"},
        ),
    log:
        f"{LOGS}/remedies.log",
    localrule: True
    params:
        title=f"Communication remedies: study {config['study']}",
    script:
        "../scripts/step.py"


rule compare:
    """This study's cells and fits against an earlier study's (config compare_with)."""
    input:
        cells=f"{TABLES}/cells.csv",
        fits=f"{TABLES}/fits.csv",
    output:
        ratios=f"{RESULTS}/compare/ratios.csv",
        only=f"{RESULTS}/compare/only.csv",
        fits=f"{RESULTS}/compare/fits.csv",
        links=f"{RESULTS}/compare/links.csv",
        sides=f"{RESULTS}/compare/sides.csv",
        html=report(
            f"{RESULTS}/compare/compare.html",
            caption="../../report/compare.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "against an earlier study"},
        ),
    log:
        f"{LOGS}/compare.log",
    localrule: True
    params:
        a=config["compare_with"],
    script:
        "../scripts/step.py"


rule findings:
    """Findings, one row per strategy, model, network and layout with a verdict, from the tables."""
    input:
        **training_tables(),
        **(
            {"loss_breakdown": f"{TABLES}/loss_breakdown.csv"}
            if measures_controls()
            else {}
        ),
        cells=f"{TABLES}/cells.csv",
        scaling=f"{TABLES}/scaling.csv",
        fits=f"{TABLES}/fits.csv",
        break_even=f"{TABLES}/break_even.csv",
        predictions=f"{TABLES}/predictions.csv",
        cost=f"{TABLES}/cost.csv",
        cost_to_target=f"{TABLES}/cost_to_target.csv",
        remedies=rules.remedies.output.table,
        remedies_accuracy=rules.remedies.output.accuracy,
        remedies_top=rules.remedies.output.top,
        # where the chosen layout's loss goes: only in studies that run control cells
    output:
        csv=f"{TABLES}/findings.csv",
        top=f"{TABLES}/findings_top.json",
        # the landing page's answer table and the notes it cannot hold (report/workflow.rst)
        answer=f"{TABLES}/answer.json",
        html=report(
            f"{TABLES}/findings.html",
            caption="../../report/findings.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "findings"},
        ),
    log:
        f"{LOGS}/findings.log",
    localrule: True
    params:
        title=f"Findings: study {config['study']}",
        cells_dir=CELLS_DIR,
        prices=json.dumps(config["cost"]),
    script:
        "../scripts/step.py"


rule post_vs_run:
    """The source post's numbers (config reference) beside this run's."""
    input:
        **training_tables(with_runs=True),
        cells=f"{TABLES}/cells.csv",
        fits=f"{TABLES}/fits.csv",
        scaling=f"{TABLES}/scaling.csv",
        break_even=f"{TABLES}/break_even.csv",
        remedies=rules.remedies.output.table,
        remedies_accuracy=rules.remedies.output.accuracy,
    output:
        csv=f"{TABLES}/post_vs_run.csv",
        html=page(
            f"{TABLES}/post_vs_run.html",
            f"{TABLES}/post_vs_run.csv",
            caption="../../report/post_vs_run.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "the post vs this run"},
        ),
    log:
        f"{LOGS}/post_vs_run.log",
    localrule: True
    params:
        reference=json.dumps(config["reference"]),
        title="The post vs this run",
    script:
        "../scripts/step.py"


rule mfu_figure:
    """Model FLOPs utilisation per cell, a figure from cells.csv."""
    input:
        cells=f"{TABLES}/cells.csv",
    output:
        figure=report(
            f"{FIGURES}/mfu.png",
            caption="../../report/mfu.rst",
            category="1. Throughput",
            subcategory="figures",
            labels={"name": "model FLOPs utilisation"},
        ),
    log:
        f"{LOGS}/mfu_figure.log",
    localrule: True
    script:
        "../scripts/step.py"


# Figures for the answers, drawn once (Altair): the report embeds the static PNG; the
# interactive page of the same figure stays beside it in figures/ (its Vega JavaScript alone
# is 0.9 MB, more than the rest of the report's results: docs/decisions/report-pages-with-data.md).
rule answer_figures:
    """The answers' figures (predicted speedup, cost), static and interactive."""
    input:
        predictions=f"{TABLES}/predictions.csv",
        scaling=f"{TABLES}/scaling.csv",
        cost=rules.cost.output.table,
    output:
        speedup_static=report(
            f"{FIGURES}/answer_speedup.png",
            caption="../../report/answer_speedup.rst",
            category="0. Findings",
            subcategory="figures",
            labels={"name": "predicted speedup against nodes"},
        ),
        speedup_interactive=f"{FIGURES}/answer_speedup_interactive.html",
        cost_static=report(
            f"{FIGURES}/answer_cost.png",
            caption="../../report/answer_cost.rst",
            category="0. Findings",
            subcategory="figures",
            labels={"name": "cost per layout"},
        ),
        cost_interactive=f"{FIGURES}/answer_cost_interactive.html",
    log:
        f"{LOGS}/answer_figures.log",
    localrule: True
    script:
        "../scripts/step.py"


# Asked for only where the study measures a remedy (final_outputs): no empty figure otherwise.
rule remedies_figure:
    """Remedies' gain and fraction recovered, static and interactive, from remedies.csv."""
    input:
        remedies=rules.remedies.output.table,
    output:
        remedies_static=report(
            f"{FIGURES}/answer_remedies.png",
            caption="../../report/answer_remedies.rst",
            category="0. Findings",
            subcategory="figures",
            labels={"name": "remedies: gain and fraction recovered"},
        ),
        remedies_interactive=f"{FIGURES}/answer_remedies_interactive.html",
    log:
        f"{LOGS}/remedies_figure.log",
    localrule: True
    script:
        "../scripts/step.py"
