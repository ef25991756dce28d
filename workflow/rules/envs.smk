# One virtual environment per framework, pip-built from envs/<name>.txt (+ <name>.post.sh).
# The folder name carries the files' content hash: an edited file builds a new environment,
# an unchanged one is reused. The files are params, not inputs, so a touched but unchanged
# file does not trigger a rebuild.


rule build_env:
    output:
        f"{config['env_dir']}/{{env}}-{{hash}}/{READY_MARKER}",
    log:
        f"{config['env_dir']}/logs/{{env}}-{{hash}}.log",
    localrule: True
    resources:
        bench_slot=1,  # never beside a cell (which takes 2); two builds side by side
    params:
        env_dir=lambda wc, output: Path(output[0]).parent.parent,
    shell:
        "$DPSCALE_PYTHON -m dpscale.launch.envs {wildcards.env} --env-dir {params.env_dir} > {log} 2>&1"


rule envs:
    input:
        [env_marker(name) for name in study_envs()],
    localrule: True
