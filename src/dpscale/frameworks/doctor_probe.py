"""What a framework environment has, as ``dpscale doctor`` shows it: run inside the
environment (its built Python, or a site's interpreter or container) by
dpscale.launch.setup.doctor_targets.

    python -m dpscale.frameworks.doctor_probe MODULE...

MODULE: the modules the environment's strategies require (torch; tensorflow and horovod;
mxnet). Prints two lines. First, before any framework is imported (so a probe that hangs in
an import still has them), ``DPSCALE-DOCTOR-CHECKS [json]``: the frameworks' own fuller
checks (``python -m torch.utils.collect_env``, ``horovodrun --check-build``,
``mxnet.runtime.Features()``) as arguments to the environment's interpreter. Then
``DPSCALE-DOCTOR {json}``: the interpreter, and per module (``modules``) its version, the
devices it sees, the CUDA, cuDNN and NCCL it was built with, oneDNN (MKL-DNN), each read with
the framework's own calls (those the checks print). A module that does not import has
``error``; a field that cannot be read is named in ``errors``, the rest still read.

``frameworks`` says the same in fields that name no framework, in the order the doctor shows
them (:func:`shown`): the doctor on the launching host reads only those, so what a framework
is, and which of its facts is a problem in a CUDA study, is said here, where the framework
is. Standard library and the framework only: it runs where dpscale did not choose the
packages.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from collections.abc import Callable
from typing import Any

PREFIX = "DPSCALE-DOCTOR "
CHECKS_PREFIX = "DPSCALE-DOCTOR-CHECKS "


def guarded(info: dict[str, Any], name: str, read: Callable[[], Any]) -> Any:
    """``info[name] = read()``; where it raises, the error under ``info["errors"][name]``."""
    try:
        value = read()
    except Exception as error:  # noqa: BLE001 (one field's failure is a line, not a crash)
        info.setdefault("errors", {})[name] = one_line(error)
        return None
    info[name] = value
    return value


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "no message"
    return f"{type(error).__name__}: {text}"[:300]


def nccl_code(code: int) -> str | None:
    """NCCL_VERSION_CODE as a version: 21805 is 2.18.5 (2.9 on), 2708 is 2.7.8; 0: none."""
    if not code:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def torch_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"version": torch.__version__}
    cuda = guarded(info, "cuda", lambda: torch.version.cuda)
    guarded(info, "hip", lambda: getattr(torch.version, "hip", None))
    guarded(info, "cudnn", lambda: torch.backends.cudnn.version() if cuda else None)
    guarded(info, "devices", torch.cuda.device_count)

    def nccl() -> str | None:
        if not cuda:
            return None
        found = torch.cuda.nccl.version()
        return ".".join(map(str, found)) if isinstance(found, tuple) else nccl_code(int(found))

    guarded(info, "nccl", nccl)

    def backends() -> dict[str, bool]:
        import torch.distributed as dist

        if not dist.is_available():
            return {}
        return {
            "nccl": dist.is_nccl_available(),
            "gloo": dist.is_gloo_available(),
            "mpi": dist.is_mpi_available(),
        }

    guarded(info, "backends", backends)
    guarded(info, "onednn", lambda: torch_onednn(torch.__config__.show()))
    return info


def torch_onednn(config: str) -> str:
    """oneDNN and MKL as ``torch.__config__.show()`` lists them (what torch was built with)."""
    found = re.search(r"(?:oneDNN|MKL-DNN) (v[\w.]+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
    words = [f"oneDNN {found.group(1)}" if found else "no oneDNN"]
    return ", ".join(words + ([f"MKL {mkl.group(1)}"] if mkl else []))


def tensorflow_info() -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # its start-up lines are not ours
    import tensorflow as tf

    info: dict[str, Any] = {"version": tf.__version__}
    build = guarded(info, "build", lambda: dict(tf.sysconfig.get_build_info()))
    build = build or {}
    info["cuda"] = build.get("cuda_version") if build.get("is_cuda_build") else None
    info["cudnn"] = build.get("cudnn_version") if build.get("is_cuda_build") else None
    guarded(info, "devices", lambda: len(tf.config.list_physical_devices("GPU")))

    def onednn() -> str:
        from tensorflow.python.util import _pywrap_util_port

        state = "on" if _pywrap_util_port.IsMklEnabled() else "off"
        given = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
        return f"oneDNN {state}" + (f" (TF_ENABLE_ONEDNN_OPTS={given})" if given else "")

    guarded(info, "onednn", onednn)
    return info


def horovod_info(modules: list[str]) -> dict[str, Any]:
    """Horovod's build, as ``horovodrun --check-build`` reads it, through the binding of
    the framework the environment runs it with (TensorFlow's, else PyTorch's)."""
    import importlib

    import horovod

    info: dict[str, Any] = {"version": horovod.__version__}
    binding = "horovod.torch" if "torch" in modules and "tensorflow" not in modules else None
    hvd = importlib.import_module(binding or "horovod.tensorflow")
    info["binding"] = hvd.__name__
    guarded(info, "nccl", lambda: nccl_code(int(hvd.nccl_built())))
    for name in ("gloo", "mpi", "cuda", "rocm"):
        guarded(info, name, lambda name=name: bool(getattr(hvd, f"{name}_built")()))
    return info


def mxnet_info() -> dict[str, Any]:
    import mxnet as mx

    info: dict[str, Any] = {"version": mx.__version__}
    features = guarded(info, "features", lambda: mxnet_features(mx.runtime.Features()))
    features = features or {}
    info["cuda"] = "built" if features.get("CUDA") else None
    info["cudnn"] = "built" if features.get("CUDNN") else None
    info["nccl"] = "built" if features.get("NCCL") else None
    onednn = features.get("ONEDNN", features.get("MKLDNN"))
    info["onednn"] = None if onednn is None else f"oneDNN {'on' if onednn else 'off'}"
    home = getattr(mx, "device", None) or mx.context  # MXNet 2 renamed context to device
    guarded(info, "devices", home.num_gpus)
    return info


def mxnet_features(features: Any) -> dict[str, bool]:
    wanted = ("CUDA", "CUDNN", "NCCL", "MKLDNN", "ONEDNN", "DIST_KVSTORE", "TENSORRT")
    return {name: features.is_enabled(name) for name in wanted if name in features}


def generic_info(name: str) -> dict[str, Any]:
    import importlib

    module = importlib.import_module(name)
    return {"version": str(getattr(module, "__version__", "unknown"))}


def module_info(name: str, modules: list[str]) -> dict[str, Any]:
    readers: dict[str, Callable[[], dict[str, Any]]] = {
        "torch": torch_info,
        "tensorflow": tensorflow_info,
        "horovod": lambda: horovod_info(modules),
        "mxnet": mxnet_info,
    }
    try:
        return readers.get(name, lambda: generic_info(name))()
    except BaseException as error:  # noqa: BLE001 (an import that fails, or exits)
        if isinstance(error, KeyboardInterrupt):
            raise
        return {"error": one_line(error)}


# -- what the doctor shows, in fields that name no framework ----------------------------------

# the frameworks that run the model on the devices: a CUDA study needs their CUDA build
DEVICE_FRAMEWORKS = ("torch", "tensorflow", "mxnet")
# the frameworks' own fuller checks, in the order the doctor lists them: the arguments to the
# environment's interpreter (``python``), and the environment's own program where it is a
# built one (``program``: its name under the environment's bin/, and its arguments)
OWN_CHECKS: dict[str, dict[str, list[str]]] = {
    "torch": {"python": ["-m", "torch.utils.collect_env"]},
    "horovod": {
        "program": ["horovodrun", "--check-build"],
        "python": ["-m", "horovod.runner.launch", "--check-build"],
    },
    "mxnet": {"python": ["-c", "import mxnet; print(mxnet.runtime.Features())"]},
}


def own_checks(modules: list[str]) -> list[dict[str, Any]]:
    """The fuller checks of the frameworks among ``modules``, each with its module's name."""
    return [{"module": name, **check} for name, check in OWN_CHECKS.items() if name in modules]


def cuda_words(info: dict[str, Any]) -> str:
    """The CUDA and cuDNN a framework was built with (``built``: it says only that it was)."""
    if not info.get("cuda"):
        return "CPU build"
    built = f"CUDA {info['cuda']}" if info["cuda"] != "built" else "CUDA"
    cudnn = info.get("cudnn")
    return built + (f", cuDNN {cudnn}" if cudnn and cudnn != "built" else "")


def horovod_shown(info: dict[str, Any]) -> dict[str, Any]:
    """Horovod: its collectives, and a CUDA study's problem where NCCL is not among them."""
    ops = [name for name in ("gloo", "mpi") if info.get(name)]
    shown: dict[str, Any] = {
        "nccl": (info.get("nccl") or "without NCCL") + (f" ({', '.join(ops)})" if ops else "")
    }
    if not info.get("nccl"):
        shown["cuda_study_problem"] = (
            f"Horovod {info.get('version')} was built without NCCL, so its all-reduce on GPUs "
            "goes through host memory: rebuild it with HOROVOD_GPU_OPERATIONS=NCCL "
            "(envs/tf-horovod.post.sh does on a CUDA build; `horovodrun --check-build` lists "
            "what it has)"
        )
    return shown


def device_framework_shown(name: str, info: dict[str, Any]) -> dict[str, Any]:
    """A framework that runs the model: its build, its NCCL where it has its own, and what a
    strategy starting a process per device lacks of it on GPUs."""
    shown: dict[str, Any] = {"cuda_build_needed": name in DEVICE_FRAMEWORKS}
    if name in ("torch", "mxnet"):
        shown["nccl"] = info.get("nccl") or "none"
    backends = info.get("backends") or {}
    if name == "torch" and info.get("cuda") and not backends.get("nccl"):
        shown["multi_process_gap"] = f"torch {info.get('version')} has no NCCL backend"
    return shown


def shown(name: str, info: dict[str, Any]) -> dict[str, Any]:
    """One module as the doctor shows it. ``name``, ``version``, ``error`` (it did not
    import), ``errors`` (the fields it could not tell); ``gpus_seen``; ``cuda`` (true: a CUDA
    build); the table's words: ``built_with`` (CUDA / cuDNN), ``nccl``, ``cpu_kernels``
    (oneDNN, MKL); a CUDA study's problems: ``cuda_build_needed`` (it must be a CUDA build that
    sees the node's GPUs), ``multi_process_gap`` (what the strategies that start a process per
    device lack of it on GPUs), ``cuda_study_problem`` (a line of its own). A field it does
    not have is left out."""
    if info.get("error"):
        return {"name": name, "error": info["error"]}
    entry: dict[str, Any] = {"name": name, "version": info.get("version", "?")}
    if info.get("errors"):
        entry["errors"] = info["errors"]
    if name == "numpy":  # beside the frameworks: its version only
        return entry
    if "devices" in info:
        entry["gpus_seen"] = info["devices"]
    if name == "horovod":
        return {**entry, **horovod_shown(info)}
    entry.update(cuda=info.get("cuda"), built_with=cuda_words(info))
    entry.update(device_framework_shown(name, info))
    if info.get("onednn"):
        entry["cpu_kernels"] = info["onednn"]
    return entry


def frameworks(modules: dict[str, dict[str, Any]], asked: list[str]) -> list[dict[str, Any]]:
    """Each module read, as :func:`shown`: the ones asked for first, numpy after them."""
    order = dict.fromkeys([*asked, "numpy", *sorted(modules)])
    return [shown(name, modules[name]) for name in order if name in modules]


def probe(modules: list[str]) -> dict[str, Any]:
    from dpscale.runner.sysinfo import container

    report: dict[str, Any] = {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "modules": {},
    }
    guarded(report, "container", container)
    for name in dict.fromkeys(["numpy", *modules]):
        report["modules"][name] = module_info(name, modules)
    report["frameworks"] = frameworks(report["modules"], modules)
    return report


def main() -> None:
    modules = sys.argv[1:]
    print(CHECKS_PREFIX + json.dumps(own_checks(modules)), flush=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the frameworks' start-up lines
    report = probe(modules)
    print(PREFIX + json.dumps(report, sort_keys=True, default=str), flush=True)


if __name__ == "__main__":
    main()
