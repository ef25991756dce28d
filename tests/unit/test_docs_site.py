"""The docs site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: any warning, a
broken link or anchor among them, fails. Every user page of docs/guide/ is in the nav."""

from __future__ import annotations

import re
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


# what the install guide's table must name of each envs/ file: the frameworks and the
# libraries they are run with (the pins the other environments conflict on: numpy)
FRAMEWORK_PACKAGES = {
    "torch",
    "torchvision",
    "pillow",
    "tensorflow",
    "tensorflow-cpu",
    "horovod",
    "mxnet",
    "numpy",
}
PIN = re.compile(r"\b([A-Za-z0-9_.\[\]-]+)==([0-9][0-9A-Za-z.+-]*)")


def install_table() -> dict[str, str]:
    """docs/guide/install.md's environments table: each ``envs/`` file its row names -> that
    row's text."""
    rows = {}
    for line in (REPO / "docs" / "guide" / "install.md").read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if line.startswith("| `envs/") and len(cells) > 2:
            rows.update({name: line for name in re.findall(r"`(envs/[^`]+)`", cells[1])})
    return rows


def framework_pins(path: Path) -> dict[str, str]:
    """The framework packages ``path`` pins (``name==version``), comments left out."""
    text = "\n".join(line.split("#")[0] for line in path.read_text(encoding="utf-8").splitlines())
    return {name: version for name, version in PIN.findall(text) if name in FRAMEWORK_PACKAGES}


def test_the_install_table_names_every_framework_pin_of_envs():
    """Issue 77: each envs/ file has a row of the install guide's table, and that row names
    each framework package the file pins at the file's version (torchvision was once said
    absent while torch.txt pinned it)."""
    rows = install_table()
    files = sorted((REPO / "envs").glob("*.txt")) + sorted((REPO / "envs").glob("*.post.sh"))
    assert {f"envs/{path.name}" for path in files} <= set(rows)
    wrong = [
        f"{path.name}: {name}=={version}"
        for path in files
        for name, version in framework_pins(path).items()
        if f"`{name}=={version}`" not in rows[f"envs/{path.name}"]
    ]
    assert not wrong, "docs/guide/install.md's table lacks: " + ", ".join(wrong)
    assert framework_pins(REPO / "envs" / "torch.txt").keys() >= {"torch", "torchvision"}
    assert framework_pins(REPO / "envs" / "tf-horovod.post.sh")["horovod"]


def test_the_home_page_and_readme_list_every_guide_page():
    """Issue 77: the guide lists in docs/index.md and README.md name each page of docs/guide/
    (the image-folder page was in the nav only)."""
    pages = sorted(path.name for path in (REPO / "docs" / "guide").glob("*.md"))
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8").split("## The guide")[1]
    readme = (REPO / "README.md").read_text(encoding="utf-8").split("## Documentation")[1]
    assert [p for p in pages if f"(guide/{p})" not in index] == []
    assert [p for p in pages if f"(docs/guide/{p})" not in readme.split("\n## ")[0]] == []
