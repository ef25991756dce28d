"""What a framework environment has, as ``dpscale doctor`` shows it: run inside the
environment (its built Python, or a site's interpreter or container) by
dpscale.launch.setup.doctor.

    python -m dpscale.frameworks.doctor_probe MODULE...

MODULE: the modules the environment's strategies require (torch; tensorflow and horovod;
mxnet). Prints one line, ``DPSCALE-DOCTOR {json}``: the interpreter, and per module its
version, the devices it sees, the CUDA, cuDNN and NCCL it was built with, oneDNN (MKL-DNN),
each read with the framework's own calls (those ``python -m torch.utils.collect_env``,
``horovodrun --check-build`` and ``mxnet.runtime.Features()`` print). A module that does not
import has ``error``; a field that cannot be read is named in ``errors``, the rest still
read. Standard library and the framework only: it runs where dpscale did not choose the
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
    return report


def main() -> None:
    report = probe(sys.argv[1:])
    print(PREFIX + json.dumps(report, sort_keys=True, default=str), flush=True)


if __name__ == "__main__":
    main()
