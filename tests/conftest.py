from __future__ import annotations

import copy
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.registry import STRATEGIES

REPO = Path(__file__).resolve().parents[1]
# Tests that run every strategy take them from the registry: a new adapter is tested too.
ONE_PROCESS = sorted(name for name, s in STRATEGIES.items() if s.one_process)
MULTI_PROCESS = sorted(name for name, s in STRATEGIES.items() if not s.one_process)
# The session fixture `slurm_cluster` (one throw-away SLURM cluster for every test module
# that uses it; importing the fixture into each module would start one per module).
pytest_plugins = ["helpers.slurm_cluster", "helpers.processes"]  # processes: the `mark` fixture


# The kind of a test is its folder: unit/ (no process of dpscale's starts), integration/
# (real launchers, ranks, namespaces, framework environments), e2e/ (whole studies through
# Snakemake). End-to-end tests are slow by definition; integration tests that build
# framework environments carry @pytest.mark.slow themselves.
KINDS = ("unit", "integration", "e2e")


def built_envs(strategies) -> None:
    """Build (or wait for) the environments of these strategies before a study's Snakemake
    starts. Side by side, two studies' Snakemake runs in the checkout would each want to
    make the same environment (an output of both) and one stops with a LockException; once
    built, an environment is an input only, which two runs may share."""
    from dpscale.launch.setup.envs import ensure_env

    for env in dict.fromkeys(STRATEGIES[name].env for name in strategies):
        ensure_env(env)


def kind_of(item: pytest.Item) -> str:
    return Path(item.path).parent.name


# make test runs the suite in two phases (docs/decisions/tests-side-by-side.md): first the
# tests that do not measure, three at a time (pytest -n 3 -m side_by_side), then the rest one
# at a time, as a cell measures alone. Unit tests are side by side by their folder; an
# integration or e2e module says so itself (pytestmark = SIDE_BY_SIDE) when none of its tests
# asserts a measured quality, uses an emulated network or waits for a quiet machine.
SIDE_BY_SIDE = pytest.mark.side_by_side


SLURM_MODULES = "test_slurm_"  # the modules that may use the SLURM cluster start so


def work_unit(nodeid: str) -> str:
    """What one worker runs whole: a module (its fixtures build a study once), and every
    module that may use the SLURM cluster together (one cluster per machine)."""
    path = nodeid.split("::", 1)[0]
    return "slurm" if Path(path).name.startswith(SLURM_MODULES) else path


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's scope scheduling with work_unit as the scope (its xdist_group marks
    do not group under pytest 9, whose node ids are no longer a string xdist can suffix)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    # xdist would hand out the scopes with the most tests first (a unit module of 900
    # generated documents before a study of 8 tests); the order of the items is ours
    config.option.loadscopereorder = False
    return ByWorkUnit(config, log)


# Side by side, the modules that take longest start first, so that none starts last and
# runs alone (their times: docs/measurements/): the SLURM modules, the tiny study, then the
# runners and faults of every strategy.
LONGEST_FIRST = (SLURM_MODULES, "test_workflow.py", "test_runners.py", "test_faults.py")


def start_rank(item: pytest.Item) -> int:
    name = Path(item.path).name
    return next((i for i, p in enumerate(LONGEST_FIRST) if name.startswith(p)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        kind = kind_of(item)
        if kind in KINDS:
            item.add_marker(kind)
        if kind == "e2e":
            item.add_marker(pytest.mark.slow)
        if kind == "unit":
            item.add_marker(SIDE_BY_SIDE)
        if "slurm_cluster" in item.fixturenames and work_unit(item.nodeid) != "slurm":
            raise pytest.UsageError(
                f"{item.nodeid}: uses the SLURM cluster: name it {SLURM_MODULES}*"
            )
    order = KINDS
    if os.environ.get("PYTEST_XDIST_WORKER"):
        order = KINDS[::-1]  # the longest first, so no worker is left with one at the end
        items.sort(key=start_rank)
    # serially unit tests first: they need no environment, so they run while prebuild()
    # installs (side by side, the first tests wait on its locks while the other worker runs)
    items.sort(key=lambda item: order.index(kind_of(item)) if kind_of(item) in KINDS else 0)


# Installs that integration and e2e tests wait for, started in the background when the
# session begins: every framework environment (dpscale.launch.setup.envs, one after another in
# the registry's order) and, beside them, where SLURM tests may run, SLURM's packages. They
# take minutes (Horovod compiles; apt) and mostly wait on the network or one core, so the
# unit tests run beside them. A test that needs one before it is ready waits on its lock
# (envs.build_env, ci/slurm/install.sh). DPSCALE_PREBUILD=0 turns this off.
PREBUILD_LOG = REPO / ".envs" / "logs" / "prebuild.log"


def prebuild_scripts(kinds: set[str], slurm: bool = True) -> list[str]:
    """Shell lines to run side by side: the environments in turn, and SLURM's install."""
    if os.environ.get("DPSCALE_PREBUILD", "1") == "0" or not kinds & {"integration", "e2e"}:
        return []
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return []  # side by side, the first worker installs for all
    from helpers.slurm_cluster import skip_reason

    envs = dict.fromkeys(s.env for s in STRATEGIES.values())  # the registry's order
    build = [shlex.join([sys.executable, "-m", "dpscale.launch.setup.envs", name]) for name in envs]
    scripts = [" ; ".join(build)]
    if slurm and skip_reason() is None:
        scripts.append(shlex.join(["bash", str(REPO / "ci" / "slurm" / "install.sh")]))
    return scripts


@pytest.fixture(scope="session", autouse=True)
def prebuild(request: pytest.FixtureRequest):
    items = request.session.items
    uses_slurm = any("slurm_cluster" in item.fixturenames for item in items)
    scripts = prebuild_scripts({kind_of(item) for item in items}, slurm=uses_slurm)
    if scripts:
        PREBUILD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(PREBUILD_LOG if scripts else os.devnull, "a") as log:
        processes = [
            subprocess.Popen(
                ["bash", "-c", script], cwd=REPO, stdout=log, stderr=log, start_new_session=True
            )
            for script in scripts
        ]
    yield
    for process in processes:  # a session cut short (-x, a failure) leaves no install running
        try:
            process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)


def network_namespaces() -> tuple[set[str], set[str]]:
    """``ip netns list`` and ``ls /etc/netns``: what emulated nodes leave if anything does."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    etc = Path("/etc/netns")
    folders = {p.name for p in etc.iterdir()} if etc.is_dir() else set()
    return {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}, folders


@pytest.fixture(scope="session", autouse=True)
def no_namespace_outlives_the_suite():
    """Every namespace and /etc/netns folder a test made is gone when the suite ends.

    Only new names fail: ones a dead launcher left before the suite began may be reaped by
    the tests (the machine CI runs on can start with them)."""
    if shutil.which("ip") is None:
        yield
        return
    listed_before, folders_before = network_namespaces()
    yield
    listed_after, folders_after = network_namespaces()
    assert (listed_after - listed_before, folders_after - folders_before) == (set(), set())


@pytest.fixture
def default_config() -> dict:
    with open(REPO / "config.yaml", encoding="utf-8") as handle:
        return copy.deepcopy(yaml.safe_load(handle))


def make_cell(
    strategy="torch-ddp", devices=1, batch=8, nodes=1, mode="synthetic", **kwargs
) -> Cell:
    return Cell(
        study="test",
        strategy=strategy,
        model=ModelConfig("resnet18", "cifar", 32, 10),
        mode=mode,
        nodes=nodes,
        devices_per_node=devices,
        batch_per_device=batch,
        measure=Measure(warmup_steps=1, windows=3, steps_per_window=2, timeout_s=60),
        **kwargs,
    )


TABLES = ("cells", "windows", "fits", "scaling", "break_even", "repeatability", "timeline")
TABLE_FILES = {"timeline": "bucket_timeline"}  # output name -> file name, where they differ


def aggregate(tables: Path, paths) -> None:
    """The aggregate rule's step: result files into ``tables/<name>.csv``."""
    from dpscale.steps.results import aggregate as step

    outputs = {name: tables / f"{TABLE_FILES.get(name, name)}.csv" for name in TABLES}
    step({}, outputs, {"results": [str(p) for p in paths]})
