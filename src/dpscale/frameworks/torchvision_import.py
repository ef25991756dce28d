"""torchvision beside a torch its C++ extension was not built for.

PyPI's torchvision wheel is built against CUDA torch. Beside the CPU-only wheel its C++
extension does not load, and torchvision 0.28 then fails at import: it registers fake
kernels for two of the extension's operators without checking that they exist
(pytorch/vision#9085 and #9337; the guard is proposed upstream in pytorch/vision#9649).
Declaring those two operators' schemas, with no kernels, lets the import finish.
torchvision's own check (``extension._has_ops``) still reports its operators missing and
raises its own error if one is called; datasets, transforms and the classification models
call none of them. Where the extension loads, nothing is declared.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

import torch

# the operators torchvision 0.28's _meta_registrations registers without a guard, with the
# schemas its C++ extension defines for them (torchvision/csrc/ops/nms.cpp)
UNGUARDED_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_declared: list[torch.library.Library] = []  # kept alive: a Library's definitions die with it


def extension_loads() -> bool:
    """Whether torchvision's C++ extension loads beside this torch (found as torchvision
    finds it, by ``importlib``'s extension suffixes in the package folder)."""
    package = importlib.util.find_spec("torchvision")
    if package is None or not package.submodule_search_locations:
        raise ImportError("torchvision is not installed in this environment")
    details = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for folder in package.submodule_search_locations:
        found = importlib.machinery.FileFinder(folder, details).find_spec("_C")
        if found is not None and found.origin:
            try:
                torch.ops.load_library(found.origin)
            except OSError:
                return False
            return True
    return False


def declare_unguarded_operators() -> None:
    """The two schemas torchvision's import needs when its extension did not define them."""
    if _declared:
        return
    library = torch.library.Library("torchvision", "DEF")
    for schema in UNGUARDED_SCHEMAS:
        library.define(schema)
    _declared.append(library)


def import_torchvision() -> tuple[ModuleType, bool]:
    """torchvision, and whether its C++ operators are there (False: datasets, transforms
    and models work; nms, roi_align and the other detection operators do not)."""
    if "torchvision" not in sys.modules and not extension_loads():
        declare_unguarded_operators()
    import torchvision

    return torchvision, torchvision.extension._has_ops()
