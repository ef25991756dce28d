"""What the workflow knows of a strategy, declared by the strategy's adapter module.

An adapter (``dpscale/strategies/<name>.py``) owns everything about one strategy: this
declaration (framework, environment, launch kind, skip rules) and the per-rank operations
its runner performs inside its framework environment. The workflow and the launcher run in
the analysis environment, where no framework is installed, and still import the adapter to
read its ``STRATEGY``: the adapter's framework imports sit in a :func:`framework_imports`
block (the pattern of benchopt's ``safe_import_context``), which lets a missing framework
pass at import time and raises it when the runner actually starts (:meth:`require`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from dpscale.plan.controls import MEANING, Control
from dpscale.plan.errors import ConfigError
from dpscale.plan.remedies import NONE, Comm
from dpscale.plan.traffic import KINDS, Traffic

if TYPE_CHECKING:
    from dpscale.plan.cell import Cell, ModelConfig


# why a strategy whose adapter declares no folder_pipeline skips folder cells
NO_FOLDER_PIPELINE = "no image-folder pipeline for this framework yet"


class framework_imports:  # noqa: N801 (used as a statement: ``with framework_imports() as fw``)
    """``with framework_imports() as framework: import torch`` in an adapter module."""

    def __init__(self) -> None:
        self.error: ImportError | None = None

    def __enter__(self) -> framework_imports:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if isinstance(error, ImportError):
            self.error = error
            return True
        return False

    def require(self) -> None:
        """In the runner: the framework must be there."""
        if self.error is not None:
            raise self.error


@dataclass(frozen=True)
class CellOption:
    """A config key of one strategy that its cells carry, e.g. mxnet-dist's ``mxnet_servers``.

    ``schema`` is the key's JSON schema (type, bounds, ``default``, description): the study
    config is validated with it (plan.config). Only the strategy's own cells carry the value,
    so changing it reruns only those cells; it is not part of the cell id.
    ``omit_at_default``: a cell whose value is the default does not carry the key at all
    (:meth:`Strategy.option` falls back to the default), so adding an option leaves the
    strategy's existing cells, their parameters and results as they were; only the cells
    that set it differ. Options cells carried before it existed keep it False (mxnet-dist's
    ``mxnet_servers``: stored results name it).
    """

    name: str
    schema: Mapping[str, Any] = field(hash=False)
    omit_at_default: bool = False

    def carried(self, value: Any) -> bool:
        """Whether a cell with this value carries the key."""
        return not (self.omit_at_default and value == self.default)

    @property
    def default(self) -> Any:
        return self.schema["default"]


@dataclass(frozen=True)
class CommSupport:
    """The communication remedies (plan.remedies) an adapter applies; ``none`` always.

    ``remedies``: names it applies in synthetic and training cells; ``collectives``: those
    whose own path its collectives mode times; ``bucket``: what ``bucket_mb`` sets (None: it
    cannot); ``cycle``: what ``cycle_ms`` sets (None: it cannot); ``cuda_only``: remedy ->
    the framework's own refusal on CPU, quoted in the skip reason (an integration test checks
    the framework still says so).
    """

    remedies: tuple[str, ...] = ()
    collectives: tuple[str, ...] = ()
    bucket: str | None = None
    cycle: str | None = None
    cuda_only: tuple[tuple[str, str], ...] = ()
    # remedy -> why training cells cannot use it
    not_in_training: tuple[tuple[str, str], ...] = ()

    def skip_reason(self, strategy: str, comm: Comm, accelerator: str, mode: str) -> str | None:
        if comm.is_default:
            return None
        if comm.name != "none" and comm.name not in self.remedies:
            return (
                f"{strategy} does not apply comm {comm.name!r}; it applies: "
                f"{['none', *self.remedies]}"
            )
        refusal = dict(self.cuda_only).get(comm.name)
        if refusal and accelerator != "cuda":
            return f"{strategy} applies comm {comm.name!r} on cuda only; on cpu: {refusal}"
        if comm.bucket_mb is not None and self.bucket is None:
            return f"{strategy} has no bucket or fusion size to set (comm bucket_mb)"
        if comm.cycle_ms is not None and self.cycle is None:
            return f"{strategy} has no fusion cycle time to set (comm cycle_ms)"
        if mode == "collectives":
            return self.collectives_skip_reason(comm)
        untrainable = dict(self.not_in_training).get(comm.name)
        if untrainable and mode == "train":
            return f"{strategy} measures comm {comm.name!r} in synthetic cells only: {untrainable}"
        return None

    def collectives_skip_reason(self, comm: Comm) -> str | None:
        if comm.bucket_mb is not None:
            return (
                "bucket_mb cuts a gradient into messages; collectives cells time one message "
                "per size, as the cell without it does"
            )
        if comm.name != "none" and comm.name not in self.collectives:
            return (
                f"comm {comm.name!r} does not change the all-reduce of one message; "
                "collectives cells time it as comm 'none' does"
            )
        return None


@dataclass(frozen=True)
class Strategy:
    """A strategy as the matrix, the launcher and the SLURM resources see it.

    ``launch`` names a kind of ``dpscale.launch.kinds`` (how the ranks start on one node,
    as SLURM tasks, ...). ``one_process``: one process drives all of a node's devices.
    ``cell_options``: strategy-specific config keys that go into its cells.
    ``oom_patterns``: regular expressions of the framework's out-of-memory messages, which
    make a failed cell ``oom`` (the launcher also knows the C and Python runtime's own).
    ``runner``: the module run as ``python -m`` (the adapter itself).
    ``requires``: the framework versions it drives, ``module>=X,<Y`` (the module's
    ``__version__``), checked when a site interpreter is probed (launch.setup.interpreters).
    ``comm``: the communication remedies it applies (config ``comm``).
    ``traffic``: what one step sends between ranks (plan.traffic), the only thing the
    communication model prices; a strategy without it is refused before any job.
    ``folder_pipeline``: the input pipeline its folder cells read a user's image folder
    through (config ``image_folder``); None: its folder cells are skipped.
    ``model_zoo``: the framework zoo (plan.cell.ZOOS) whose models it builds by name
    besides the shared ResNets (config ``models``: ``<zoo>.<name>``); None: none, its cells
    of a zoo model are skipped, as are those of another framework's zoo.
    ``controls``: the control cells it runs (plan.controls: ``local``, ``barrier``), each
    with how, in the framework's words; ``no_controls``: why it runs none, where it declares
    none (its control cells are skipped with it).
    ``environment``: the variables a cell's processes start with, from the cell (its
    options), set by the launcher before the framework is imported: a framework that reads
    its settings at import (TensorFlow's ``TF_ENABLE_ONEDNN_OPTS``) cannot be told later.
    """

    name: str
    framework: str
    env: str
    launch: str
    runner: str
    one_process: bool
    multi_node: bool
    cell_options: tuple[CellOption, ...] = ()
    oom_patterns: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    comm: CommSupport = CommSupport()
    traffic: Traffic | None = None
    folder_pipeline: str | None = None
    model_zoo: str | None = None
    controls: tuple[Control, ...] = ()
    no_controls: str = "its adapter declares no control cells yet"
    environment: Callable[[Cell], Mapping[str, str]] | None = field(default=None, compare=False)

    def rank_environment(self, cell: Cell) -> dict[str, str]:
        """The variables its cell ``cell``'s processes start with (``environment``)."""
        return dict(self.environment(cell)) if self.environment else {}

    def control(self, name: str) -> Control | None:
        """Its declaration of control ``name``, or None where it does not run it."""
        return next((c for c in self.controls if c.name == name), None)

    def control_skip_reason(self, name: str) -> str | None:
        """Why it cannot run control ``name`` (plan.controls), or None."""
        if self.control(name) is not None:
            return None
        if not self.controls:
            return f"{self.name} runs no control cells: {self.no_controls}"
        runs = [c.name for c in self.controls]
        return f"{self.name} does not run control {name!r} ({MEANING[name]}); it runs {runs}"

    def declared_traffic(self) -> Traffic:
        """Its traffic; one line where its adapter declares none."""
        if self.traffic is None:
            raise ConfigError(
                f"strategies: {self.name} declares no traffic (STRATEGY.traffic in its "
                f"adapter); allowed: a strategy declaring one of {list(KINDS)}"
            )
        return self.traffic

    def option(self, cell: Cell, name: str) -> Any:
        """The cell's value of one of this strategy's own config keys, or the declared default
        (the matrix gives its cells every value; a cell built by hand may lack one)."""
        declared = {option.name: option for option in self.cell_options}
        if name not in declared:
            raise KeyError(f"{self.name} declares no option {name!r}: {sorted(declared)}")
        return dict(cell.options).get(name, declared[name].default)

    def skip_reason(
        self,
        accelerator: str,
        nodes: int,
        devices_per_node: int,
        mode: str = "synthetic",
        comm: Comm = NONE,
    ) -> str | None:
        """Why a cell of this strategy cannot be measured at all, decided at plan time."""
        reason = self._layout_skip_reason(accelerator, nodes, devices_per_node, mode)
        return reason or self.comm.skip_reason(self.name, comm, accelerator, mode)

    def model_skip_reason(self, model: ModelConfig) -> str | None:
        """Why it cannot build ``model``: a zoo model of a zoo it does not build from."""
        if model.zoo is None or model.zoo == self.model_zoo:
            return None
        builds = "the shared ResNets"
        if self.model_zoo is not None:
            builds += f" and {self.model_zoo}.* models"
        return f"model {model.name} is from {model.zoo}'s zoo; {self.name} builds {builds}"

    def _layout_skip_reason(
        self, accelerator: str, nodes: int, devices_per_node: int, mode: str
    ) -> str | None:
        if mode == "collectives":
            reason = self.collectives_skip_reason(nodes * devices_per_node)
            if reason:
                return reason
        if mode == "folder" and self.folder_pipeline is None:
            return NO_FOLDER_PIPELINE
        if nodes > 1 and not self.multi_node:
            return f"{self.name} runs in one process on one node; it cannot span {nodes} nodes"
        if accelerator == "cpu" and self.one_process and devices_per_node > 1:
            return (
                f"{self.name} drives several devices from one process; on CPU there is one "
                "device per process, so only devices_per_node=1 is meaningful"
            )
        return None

    def collectives_skip_reason(self, processes: int) -> str | None:
        """Collectives cells time the all-reduce between a strategy's processes: there is
        none in a one-process strategy, nor in a cell of one process."""
        if self.one_process:
            return (
                f"{self.name} drives every device from one process: it has no inter-process "
                "all-reduce to time (collectives mode times multi-process strategies)"
            )
        if processes < 2:
            return "an all-reduce needs at least 2 processes; this cell has 1"
        return None


def version_tuple(version: str) -> tuple[int, ...]:
    """``2.13.0+cpu`` -> (2, 13, 0): the leading numbers of a version."""
    numbers = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(numbers)


def required_module(requirement: str) -> str:
    """``tensorflow>=2.9,<2.16`` -> ``tensorflow``."""
    return re.split(r"[<>=]", requirement, maxsplit=1)[0]


def unmet(requirement: str, version: str) -> str | None:
    """Why ``version`` does not meet ``requirement`` (``torch>=2.0,<3``), or None."""
    module = required_module(requirement)
    bounds = requirement[len(module) :]
    have = version_tuple(version)
    checks = {">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}
    for bound in filter(None, bounds.split(",")):
        op, wanted = re.match(r"(>=|<=|<)\s*(\S+)", bound).groups()
        width = len(version_tuple(wanted))
        if not checks[op](have[:width], version_tuple(wanted)):
            return f"{module} {version} is not supported (dpscale drives {requirement})"
    return None
