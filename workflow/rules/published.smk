# Published multi-GPU results predicted from a borrowed one-device profile (issue 50), in the
# report's "5. Network model": no cell is measured. The cases file and the profile are the
# config's published_cases, else the workflow's own (docs/decisions/published-cases-inputs.md).
from dpscale.workflow_door import published_files


rule published_cases:
    """Published multi-GPU results predicted (extrapolated) from cases and a borrowed profile."""
    input:
        **published_files(config),
    output:
        table=f"{TABLES}/published_cases.csv",
        top=f"{TABLES}/published_cases_top.json",
        html=report(
            f"{TABLES}/published_cases.html",
            caption="../../report/published_cases.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "published multi-GPU results, predicted (extrapolated)"},
        ),
    log:
        f"{LOGS}/published_cases.log",
    localrule: True
    resources:
        bench_slot=1,  # it can start while cells measure: never beside one (a cell takes 2)
    script:
        "../scripts/step.py"
