# The answer first: findings (one row per strategy x model x network x layout, with a verdict),
# the source post beside this run, the answers' figures and model FLOPs utilisation.
# "0. Findings" sorts first among the report's categories (the report orders them by name).


rule remedies:
    """Each communication remedy beside no remedy, and its accuracy cost, from the tables: a
    job of its own, as it needs no model (a study's remedies table without the fits)."""
    input:
        **training_tables(["training_runs"]),
        scaling=f"{TABLES}/scaling.csv",
        cells=f"{TABLES}/cells.csv",
        break_even=f"{TABLES}/break_even.csv",
        collectives=rules.collectives.output.table,
    output:
        remedies=f"{TABLES}/remedies.csv",
        remedies_accuracy=f"{TABLES}/remedies_accuracy.csv",
        remedies_top=f"{TABLES}/remedies_top.json",
        remedies_html=page(
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
        study=config["study"],
    script:
        "../scripts/step.py"


rule findings:
    """The answer, from the tables, the model's predictions and the remedies: cost per
    layout, the findings (one row per strategy, model, network and layout with a verdict,
    and the landing page's answer table), the source post beside this run, and the answers'
    figures; one job, its steps in order (dpscale.steps.STEPS)."""
    input:
        **training_tables(),
        # where the chosen layout's loss goes: only in studies that run control cells
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
        remedies=rules.remedies.output.remedies,
        remedies_accuracy=rules.remedies.output.remedies_accuracy,
        remedies_top=rules.remedies.output.remedies_top,
    output:
        cost=f"{TABLES}/cost.csv",
        cost_to_target=f"{TABLES}/cost_to_target.csv",
        cost_html=report(
            f"{TABLES}/cost.html",
            caption="../../report/cost.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "cost per layout"},
        ),
        findings=f"{TABLES}/findings.csv",
        findings_top=f"{TABLES}/findings_top.json",
        # the landing page's answer table and the notes it cannot hold (report/workflow.rst)
        answer=f"{TABLES}/answer.json",
        findings_html=report(
            f"{TABLES}/findings.html",
            caption="../../report/findings.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "findings"},
        ),
        post_vs_run=f"{TABLES}/post_vs_run.csv",
        post_vs_run_html=page(
            f"{TABLES}/post_vs_run.html",
            f"{TABLES}/post_vs_run.csv",
            caption="../../report/post_vs_run.rst",
            category="0. Findings",
            subcategory="tables",
            labels={"name": "the post vs this run"},
        ),
        # the answers' figures, drawn once (Altair): the report embeds the static PNG; the
        # interactive page of the same figure stays beside it in figures/ (its Vega
        # JavaScript alone is 0.9 MB: docs/decisions/report-pages-with-data.md)
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
        f"{LOGS}/findings.log",
    localrule: True
    params:
        study=config["study"],
        prices=json.dumps(config["cost"]),
        accelerator=config["accelerator"],
        cells_dir=CELLS_DIR,
        reference=json.dumps(config["reference"]),
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


# Asked for only where the study measures a remedy (final_outputs): no empty figure otherwise.
rule remedies_figure:
    """Remedies' gain and fraction recovered, static and interactive, from remedies.csv."""
    input:
        remedies=rules.remedies.output.remedies,
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
