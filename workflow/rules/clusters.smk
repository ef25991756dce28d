# Your clusters (config clusters): each predicted from this study's one-device cells
# and bucket timeline over its own nccl-tests log, as `dpscale predict --cluster` does; in the
# report's "5. Network model", a sentence each on the landing page. Nothing is measured on a
# cluster: every number is extrapolated. Not in final_outputs() when clusters is empty.
from dpscale.workflow_door import cluster_inputs, cluster_paths


rule cluster_predictions:
    """The config's clusters predicted (extrapolated) from the one-device cells and timeline."""
    input:
        cells=f"{TABLES}/cells.csv",
        timeline=f"{TABLES}/bucket_timeline.csv",
        clusters=cluster_inputs(config),
    output:
        table=f"{TABLES}/cluster_predictions.csv",
        top=f"{TABLES}/cluster_predictions_top.json",
        html=report(
            f"{TABLES}/cluster_predictions.html",
            caption="../../report/cluster_predictions.rst",
            category="5. Network model",
            subcategory="tables",
            labels={"name": "your clusters, predicted (extrapolated)"},
        ),
    log:
        f"{LOGS}/cluster_predictions.log",
    localrule: True
    params:
        clusters=json.dumps(cluster_paths(config)),
    script:
        "../scripts/step.py"
