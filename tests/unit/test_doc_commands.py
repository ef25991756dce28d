"""Every shell example in the README and in docs/guide/ works as written: each command is run
here (the cheap ones: check-config, status, predict and compare on the files the repository
ships, snakemake dry runs), or checked with --help (the benchmarks), or named below with the
test that runs it and why it does not run here (whole studies, installs, SLURM, root).

Commands run in a folder of their own holding links to the repository's studies/, evidence/,
tests/ and docs/, so what they write (results/, logs/) lands there and nothing a developer
measured in the checkout is read or rerun."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from dpscale import cli

PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = {"bash", "sh", "shell"}
LINKED = ("studies", "evidence", "tests", "docs", "mkdocs.yml")
# A study file of the user's own, as the install page's examples name it: the default study.
MY_STUDY = "study: mystudy\n"

WHOLE_STUDY = "runs a whole study (minutes to hours); the workflow runs end to end there"
INSTALLED = "installs the package into a fresh environment and runs a study from outside"
SLURM = "needs a SLURM cluster; the test starts a throw-away one"
PROFILE = "the shell set-up of a SLURM account; what the profile makes of it: test_profiles.py"
GPU = "measures on a GPU node, or analyses what was measured there"
# Long-running examples: the test that runs the same path, and why it is not run here.
COVERED_ELSEWHERE = {
    "make study": ("tests/e2e/test_workflow.py", WHOLE_STUDY),
    "make test": (".ci/run", "the whole suite: CI runs exactly this"),
    "pipx install '/path/to/dpscale[analysis]'": ("tests/e2e/test_installed_package.py", INSTALLED),
    "dpscale run": ("tests/e2e/test_installed_package.py", INSTALLED),
    "dpscale report mystudy.yaml": ("tests/e2e/test_installed_package.py", INSTALLED),
    ".venv/bin/dpscale run studies/post002_throughput_law_mini.yaml": (
        "tests/e2e/test_installed_package.py",
        WHOLE_STUDY,
    ),
    ".venv/bin/dpscale report studies/post002_throughput_law_mini.yaml": (
        "tests/e2e/test_workflow.py",
        "needs the study's results; the report is written from a tiny study there",
    ),
    ".venv/bin/dpscale report studies/post002_throughput_law_mini.yaml --out reports/post002": (
        "tests/e2e/test_shared_folder.py",
        "needs the study's results; a user who may only read them renders one there",
    ),
    ".venv/bin/dpscale lock studies/post002_throughput_law_mini.yaml --out locks/": (
        "tests/e2e/test_installed_package.py",
        "needs a built framework environment",
    ),
    ".venv/bin/dpscale doctor studies/post002_throughput_law_mini.yaml": (
        "tests/integration/test_doctor_on_a_study.py",
        "needs the study's environments built; the default study's doctor runs there",
    ),
    ".venv/bin/dpscale lock studies/post002_throughput_law_mini.yaml --env torch --out locks/": (
        "tests/e2e/test_installed_package.py",
        "needs a built framework environment",
    ),
    ".venv/bin/snakemake": ("tests/e2e/test_workflow.py", WHOLE_STUDY),
    ".venv/bin/snakemake --report results/default/report.html": (
        "tests/e2e/test_workflow.py",
        "needs the study's results",
    ),
    ".venv/bin/snakemake --configfile studies/post004_dataparallel_mini.yaml": (
        "tests/e2e/test_workflow.py",
        WHOLE_STUDY,
    ),
    ".venv/bin/dpscale rerun studies/post002_throughput_law_mini.yaml "
    "torch-ddp/resnet18-imagenet64-c10/synthetic/n1-d2-b32-r0": (
        "tests/e2e/test_workflow.py",
        "measures a cell again",
    ),
    ".venv/bin/dpscale rerun studies/post002_throughput_law_mini.yaml "
    "results/post002_throughput_law_mini/cells/torch-ddp/resnet18-imagenet64-c10/synthetic/"
    "n1-d2-b32-r0.json": ("tests/e2e/test_workflow.py", "measures a cell again"),
    "PYTHONPATH=src python3 -m dpscale.launch.without_snakemake 'studies/gpu/*.yaml' "
    "--interpreter python3 --deadline-s 420": ("tests/unit/test_without_snakemake.py", GPU),
    ".venv/bin/snakemake --configfile studies/gpu/resnet50_amp_bf16_channels_last.yaml": (
        "tests/unit/test_without_snakemake.py",
        GPU,
    ),
    ".venv/bin/python -m dpscale.launch.emulation.netns probe --rate 1gbit --mbytes 48": (
        "tests/integration/test_netns.py",
        "needs root and iproute2, and measures a link",
    ),
    ".venv/bin/snakemake --profile slurm -n": ("tests/e2e/test_slurm_workflow.py", SLURM),
    ".venv/bin/snakemake --profile slurm --configfile studies/post001_horovod_keras.yaml": (
        "tests/e2e/test_slurm_workflow.py",
        SLURM,
    ),
    ".venv/bin/snakemake --profile slurm --resources bench_slot=1 --groups "
    "'bench_cell=cells-{strategy}-n{nodes}-d{devices}' --group-components "
    "'cells-{strategy}-n{nodes}-d{devices}=8'": ("tests/e2e/test_slurm_workflow.py", SLURM),
    ".venv/bin/snakemake --profile slurm --configfile 'studies/<your' 'study>.yaml'": (
        "tests/e2e/test_slurm_workflow.py",
        SLURM,
    ),
    ".venv/bin/snakemake --profile slurm --configfile 'studies/<your' 'study>.yaml' "
    "--default-resources slurm_account=proj42 slurm_partition=gpu runtime=60 mem_mb=16000": (
        "tests/unit/test_profiles.py",
        SLURM,
    ),
    ".venv/bin/snakemake --profile dpscale-slurm --configfile 'studies/<your' 'study>.yaml'": (
        "tests/unit/test_profiles.py",
        SLURM,
    ),
    "export SBATCH_ACCOUNT=proj42": ("tests/unit/test_profiles.py", PROFILE),
    "export SBATCH_PARTITION=gpu": ("tests/unit/test_profiles.py", PROFILE),
    "mkdir -p '~/.config/snakemake'": ("tests/unit/test_profiles.py", PROFILE),
    "cp -r slurm '~/.config/snakemake/dpscale-slurm'": ("tests/unit/test_profiles.py", PROFILE),
    "'$EDITOR' '~/.config/snakemake/dpscale-slurm/config.yaml'": (
        "tests/unit/test_profiles.py",
        PROFILE,
    ),
    ".venv/bin/mkdocs build --strict --site-dir site/": (
        "tests/unit/test_docs_site.py",
        "the same build, into a temporary folder",
    ),
}
# Benchmarks measure for minutes on a quiet machine: their scripts run with --help only.
BENCHMARKS = {
    ".venv/bin/python benchmarks/race_reference.py",
    ".venv/bin/python benchmarks/harness_overhead.py",
}


def shell_examples(page: Path) -> list[str]:
    """Each command of the page's shell blocks, continuation lines joined and comments
    dropped, written back as one shell line."""
    found = []
    for language, body in FENCE.findall(page.read_text(encoding="utf-8")):
        if language in SHELL:
            for line in body.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                found += [shlex.join(words)] if words else []
    return found


EXAMPLES = sorted({command for page in PAGES for command in shell_examples(page)})
RUN_HERE = [c for c in EXAMPLES if c not in COVERED_ELSEWHERE and c not in BENCHMARKS]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A working folder that sees the repository's shipped files, and a user's study file."""
    work = tmp_path_factory.mktemp("examples")
    for name in LINKED:
        (work / name).symlink_to(REPO / name)
    (work / "mystudy.yaml").write_text(MY_STUDY, encoding="utf-8")
    return work


def test_the_pages_have_shell_examples_and_the_lists_name_only_real_ones():
    assert len(EXAMPLES) > 20 and RUN_HERE
    assert sorted(set(COVERED_ELSEWHERE) - set(EXAMPLES)) == []
    assert sorted(BENCHMARKS - set(EXAMPLES)) == []
    assert [t for t, _ in COVERED_ELSEWHERE.values() if not (REPO / t).is_file()] == []


def run_dpscale(words: list[str], folder: Path, monkeypatch) -> tuple[int, str]:
    """The ``dpscale`` command in this process, in ``folder``: its exit code and output."""
    monkeypatch.chdir(folder)
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            cli.main(words)
        except SystemExit as stopped:  # a text is the command's one-line refusal
            code = stopped.code if isinstance(stopped.code, int) else int(stopped.code is not None)
            print(stopped.code if isinstance(stopped.code, str) else "")
    return code, out.getvalue()


def run_snakemake(words: list[str], folder: Path) -> tuple[int, str]:
    """The analysis environment's Snakemake on the checkout's Snakefile, in ``folder``."""
    assert {"-n", "--dry-run"} & set(words), f"only dry runs run here: {words}"
    snakemake = Path(sys.executable).with_name("snakemake")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [str(snakemake), "--snakefile", str(REPO / "Snakefile"), *words],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("command", RUN_HERE, ids=lambda command: command[:90])
def test_the_example_runs(command, folder, monkeypatch):
    program, *words = shlex.split(command)
    if program in ("dpscale", ".venv/bin/dpscale"):
        code, output = run_dpscale(words, folder, monkeypatch)
    elif program == ".venv/bin/snakemake":
        code, output = run_snakemake(words, folder)
    else:
        pytest.fail(f"{command!r}: no way to run it here; run it or name its test")
    assert code == 0, output[-3000:]


@pytest.mark.parametrize("command", sorted(BENCHMARKS))
def test_a_benchmark_example_names_a_script_that_starts(command):
    _, script = shlex.split(command)
    done = subprocess.run(
        [sys.executable, str(REPO / script), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-2000:]
