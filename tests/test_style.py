"""The repository stays formatted and lint-clean (ruff, snakefmt, snakemake --lint)."""

import subprocess
import sys

import pytest

from conftest import REPO

SNAKEMAKE_FILES = [
    "Snakefile",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "workflow" / "rules").glob("*.smk")),
]


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_ruff_lint_and_format():
    lint = run(sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks")
    assert lint.returncode == 0, lint.stdout
    fmt = run(sys.executable, "-m", "ruff", "format", "--check", "src", "tests", "benchmarks")
    assert fmt.returncode == 0, fmt.stdout


def test_snakefmt():
    check = run(sys.executable, "-m", "snakefmt", "--check", *SNAKEMAKE_FILES)
    assert check.returncode == 0, check.stderr


@pytest.mark.slow
def test_snakemake_lint_is_clean():
    lint = run(sys.executable, "-m", "snakemake", "--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "Lints for" not in lint.stdout + lint.stderr
