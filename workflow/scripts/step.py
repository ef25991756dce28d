# The body of every analysis and report rule: the rule's name picks its step in dpscale.steps,
# which reads the rule's named inputs and writes its named outputs.
from dpscale.steps import run_rule

run_rule(snakemake)  # noqa: F821 (Snakemake's script directive defines it)
