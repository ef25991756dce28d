# dpscale: measure data-parallel training scaling and explain it.
# Thin wiring only: the logic lives in workflow/rules/*.smk and the dpscale package (src/).
from snakemake.utils import min_version

min_version("9.0")


# the defaults beside this Snakefile, in a checkout and in an installed package alike
# (snakemake --snakefile ... --directory <elsewhere>); study files come over it
configfile: f"{workflow.basedir}/config.yaml"


report: "report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/envs.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/imports.smk"
include: "workflow/rules/collectives.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/findings.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/clusters.smk"


rule all:
    """Every cell, its tables, figures and report pages, and the tidy CSVs: the whole study."""
    default_target: True
    input:
        final_outputs(),
        rules.data_tables.output,
