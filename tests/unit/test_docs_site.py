"""The docs site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: any warning, a
broken link or anchor among them, fails. Every user page of docs/guide/ is in the nav."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
        + ["--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def warnings(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (run.stdout + run.stderr).splitlines() if "WARNING" in line]


def nav_pages(entries) -> list[str]:
    """Every page the nav names, depth first."""
    pages = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_site_builds_strict_without_a_warning(tmp_path):
    run = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert "No module named mkdocs" not in run.stderr, "pip install -e '.[dev]' (it has mkdocs)"
    assert run.returncode == 0 and warnings(run) == [], run.stdout + run.stderr
    assert (tmp_path / "site" / "guide" / "install" / "index.html").is_file()


def test_every_guide_page_is_in_the_nav_and_every_nav_page_exists():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = nav_pages(config["nav"])
    guide = {f"guide/{p.name}" for p in (REPO / "docs" / "guide").glob("*.md")}
    assert guide <= set(listed)
    assert [p for p in listed if not (REPO / "docs" / p).is_file()] == []


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """The strict build is what catches them: a copy of the site with one bad link and one
    bad anchor does not build, and the warnings name both."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "guide" / "install.md"
    page.write_text(
        page.read_text(encoding="utf-8")
        + "\n[gone](no-such-page.md) and [nowhere](studies.md#no-such-heading)\n",
        encoding="utf-8",
    )
    run = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    found = "\n".join(warnings(run))
    assert run.returncode != 0
    assert "no-such-page.md" in found and "no-such-heading" in found
