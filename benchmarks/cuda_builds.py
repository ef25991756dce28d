"""Build every CUDA build of the framework environments on this machine, as a GPU study would.

    .venv/bin/python benchmarks/cuda_builds.py [--out DIR] [--only ENV.VARIANT ...]
                                               [--keep] [--pypi-only] [--cuobjdump PATH]

Why: `accelerator: cuda` builds envs/<env>.cuda<major>.txt (dpscale.plan.env_builds), and a
user learns that a pin does not resolve, a wheel does not import or Horovod does not build
with NCCL only on the cluster. This builds each one with dpscale's own builder
(dpscale.launch.setup.envs.build_env, the post scripts included) into ``<out>/envs``, then in
each built environment imports the framework and asks how many GPUs it sees (0 on a CPU
machine, without crashing), which CUDA it was built with, and, for Horovod, what
``horovodrun --check-build`` lists. With ``--cuobjdump`` (PyPI's nvidia-cuda-cuobjdump)
it lists the GPU code (SASS) and PTX each framework's library carries, the lines of
envs/cuda-archs.yaml. Per build: seconds, size on disk, the build's last log line when it
failed. ``--pypi-only`` hides pip's local configuration (a find-links folder of CPU wheels,
as on the developers' machines) so the build resolves as on a cluster.

Prints a table; writes ``<out>/cuda_builds.json``. The environments are removed after each
build unless ``--keep`` (they take several GB each).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dpscale.launch.setup.envs import build_env, env_prefix, env_python
from dpscale.plan.env_builds import VARIANT_FILE
from dpscale.plan.paths import ENVS_DIR

# per environment: the library whose GPU code decides which GPUs run it, and the probe
LIBRARIES = {
    "torch": "torch/lib/libtorch_cuda.so",
    "tf-horovod": "tensorflow/libtensorflow_cc.so.2",
    "mxnet": "mxnet/libmxnet.so",
}
PROBES = {
    "torch": (
        "import torch; print('framework', torch.__version__); print('cuda', torch.version.cuda);"
        " print('gpus', torch.cuda.device_count())"
    ),
    "tf-horovod": (
        "import tensorflow as tf; print('framework', tf.__version__);"
        " print('cuda', tf.sysconfig.get_build_info().get('cuda_version'));"
        " print('gpus', len(tf.config.list_physical_devices('GPU')))"
    ),
    "mxnet": (
        "import mxnet as mx; print('framework', mx.__version__);"
        " print('cuda', mx.runtime.Features().is_enabled('CUDA'));"
        " print('gpus', mx.context.num_gpus())"
    ),
}


LOCAL_PIP = {"PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_CONSTRAINT"}


def cuda_builds(envs_dir: Path) -> list[tuple[str, str]]:
    """Every (environment, variant) with a requirements file envs/<env>.cuda<major>.txt."""
    found = [VARIANT_FILE.match(path.name) for path in sorted(envs_dir.glob("*.cuda*.txt"))]
    return [(match["env"], match["variant"]) for match in found if match]


def pip_environment(pypi_only: bool) -> dict[str, str]:
    environ = dict(os.environ)
    if pypi_only:  # the machine's certificates and timeout stay: only where pip looks goes
        environ = {k: v for k, v in environ.items() if k not in LOCAL_PIP}
        environ["PIP_CONFIG_FILE"] = os.devnull
    return environ


def build_one(env: str, variant: str, root: Path) -> dict:
    prefix = env_prefix(env, root, variant=variant)
    log_path = root / "logs" / f"{prefix.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "w") as log:
        try:
            build_env(env, prefix, log=log, variant=variant)
            built, why = True, None
        except subprocess.CalledProcessError as error:
            built, why = False, f"{Path(error.cmd[-1]).name} exit {error.returncode}"
    seconds = time.monotonic() - started
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    dpscale_lines = [line for line in lines if line.startswith("[dpscale] ") and "$" not in line]
    return {
        "build": f"{env}.{variant}",
        "built": built,
        "seconds": round(seconds, 1),
        "size_gb": round(_size(prefix) / 1e9, 2),
        "failed": why,
        "last_line": (dpscale_lines or lines or [""])[-1][:300],
        "prefix": str(prefix),
        "log": str(log_path),
    }


def _size(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out else 0


def probe(env: str, prefix: Path) -> dict:
    python = env_python(prefix)
    if not python.exists():
        return {"probe": "no interpreter"}
    done = subprocess.run(
        [str(python), "-c", PROBES[env]], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        return {"probe": "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    fields = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    result = {"probe": "ok", **fields}
    horovodrun = prefix / "bin" / "horovodrun"
    if horovodrun.exists():
        listed = subprocess.run(
            [str(horovodrun), "--check-build"], capture_output=True, text=True
        ).stdout
        ops = re.findall(r"\[X\] (\w+)", listed.split("Available Tensor Operations:")[-1])
        result["horovod_tensor_operations"] = ",".join(ops)
    return result


def gpu_code(cuobjdump: Path, library: Path) -> dict:
    """The SASS and PTX architectures ``library`` carries (as 80 for sm_80)."""

    def listed(flag: str) -> list[int]:
        out = subprocess.run(
            [str(cuobjdump), flag, str(library)], capture_output=True, text=True
        ).stdout
        return sorted({int(code) for code in re.findall(r"sm_(\d+)", out)})

    return {"sass": listed("--list-elf"), "ptx": listed("--list-ptx")}


def site_packages(prefix: Path) -> Path:
    return next((prefix / "lib").glob("python3*/site-packages"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/cuda-builds"))
    parser.add_argument("--only", nargs="*", help="builds as ENV.VARIANT (torch.cuda13)")
    parser.add_argument("--keep", action="store_true", help="keep the built environments")
    parser.add_argument("--pypi-only", action="store_true", help="ignore pip's local config")
    parser.add_argument("--cuobjdump", type=Path, help="list each library's GPU code")
    args = parser.parse_args()
    environ = pip_environment(args.pypi_only)  # read before the clear
    os.environ.clear()
    os.environ.update(environ)
    root = (args.out / "envs").absolute()
    rows = []
    for env, variant in cuda_builds(ENVS_DIR):
        if args.only and f"{env}.{variant}" not in args.only:
            continue
        row = build_one(env, variant, root)
        prefix = Path(row["prefix"])
        row.update(probe(env, prefix))
        library = site_packages(prefix) / LIBRARIES[env] if prefix.exists() else None
        if args.cuobjdump and library and library.exists():
            row.update(gpu_code(args.cuobjdump, library))
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(prefix, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda_builds.json").write_text(json.dumps(rows, indent=1) + "\n")
    columns = ["build", "built", "seconds", "size_gb", "probe", "framework", "cuda", "gpus"]
    columns += ["horovod_tensor_operations", "sass", "ptx", "last_line"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    sys.exit(0)


if __name__ == "__main__":
    main()
