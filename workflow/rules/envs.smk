# One virtual environment per framework, pip-built from envs/<name>.txt (+ <name>.post.sh),
# or from its lock file (<name>.lock, dpscale lock) where there is one. A study on cuda builds
# each framework's CUDA build instead (envs/<name>.cuda<major>.txt, plan.env_builds), in a
# folder named <name>-cuda<major>-<hash>.
# The folder name carries the files' content hash: an edited file builds a new environment,
# an unchanged one is reused. The files are params, not inputs, so a touched but unchanged
# file does not trigger a rebuild.


rule build_env:
    """A framework's virtual environment, pip-built from envs/<env>.txt or its lock."""
    output:
        f"{config['env_dir']}/{{env}}-{{hash}}/{READY_MARKER}",
    log:
        f"{config['env_dir']}/logs/{{env}}-{{hash}}.log",
    localrule: True
    resources:
        bench_slot=1,  # never beside a cell (which takes 2); two builds side by side
    params:
        env_dir=lambda wc, output: Path(output[0]).parent.parent,
        locks=locks_args(),
        # {env} is the folder's name less its hash: torch, or torch-cuda13 (a CUDA build)
        name=lambda wc: split_folder_key(wc.env)[0],
        variant=lambda wc: split_folder_key(wc.env)[1],
    shell:
        "$DPSCALE_PYTHON -m dpscale.launch.setup.envs {params.name} --variant {params.variant} --env-dir {params.env_dir} {params.locks} > {log} 2>&1"


rule envs:
    """Every framework environment the study's cells run in, built and nothing measured."""
    input:
        [env_marker(name) for name in study_envs()],
    localrule: True
