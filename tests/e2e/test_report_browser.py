"""The report as a person sees it: headless Chromium, network cut off, every category and
result opened; fails on a JavaScript error, a broken image, an empty figure or table, any
request that leaves the file, a mailto: link, or landing text the opened sidebar covers.
Screenshots go to results/<study>/screenshots/."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from helpers.cdp import Page, find_browser, headless_page
from helpers.fake_study import write_fake_study
from helpers.user_words import tracker_words

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]
STUDY_FILE = REPO / "tests" / "data" / "browser.yaml"
FIRST_CATEGORY = "0. Findings"


def snakemake(*args: str, results: Path, envs: Path) -> None:
    command = [sys.executable, "-m", "snakemake", "--configfile", str(STUDY_FILE)]
    command += ["--config", f"results_dir={results}", f"env_dir={envs}", "--cores", "1", *args]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A report built by Snakemake from written (not measured) cell results."""
    root = tmp_path_factory.mktemp("browser")
    results, envs = root / "results", root / "envs"
    config = write_fake_study(STUDY_FILE, results, envs)
    snakemake(results=results, envs=envs)
    path = results / config["study"] / "report.html"
    snakemake("--report", str(path), results=results, envs=envs)
    return path


def categories(page: Page, category: str) -> list[str]:
    """The subcategories the report lists under ``category``."""
    return page.evaluate(f"Object.keys(categories[{json.dumps(category)}])")


def wait_for(page: Page, expression: str, seconds: float = 20.0, context: int | None = None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = page.evaluate(expression, context)
        if value:
            return value
        page.pump(0.25)
    raise AssertionError(f"timed out waiting for {expression}")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def open_category(page: Page, category: str) -> None:
    """What a person clicks: back to the menu, then the category (the report's result lists
    read their data when they mount, so the menu in between makes them show this one)."""
    page.evaluate("app.setView({navbarMode: 'menu'})")
    page.pump(0.2)
    page.evaluate(f"app.showCategory({json.dumps(category)})")
    page.pump(0.3)


def show_result(page: Page, path: str) -> str:
    """Open one result the way its button does (the report's own setView); its kind. A tidy
    CSV is data to download, not a page: its kind is "data" and nothing is shown."""
    entry = page.evaluate(f"results[{json.dumps(path)}].mime_type")
    if entry == "text/csv":
        return "data"
    kind = "img" if entry.startswith("image/") else "html"
    page.evaluate(
        f"app.setView({{content: {json.dumps(kind)}, "
        f"contentPath: results[{json.dumps(path)}].data_uri, resultPath: {json.dumps(path)}}})"
    )
    return kind


def check_image(page: Page) -> None:
    ok = wait_for(
        page,
        "(() => { const i = document.querySelector('img[src^=\"data:image\"]');"
        " return i && i.complete ? [i.naturalWidth, i.naturalHeight] : null; })()",
    )
    assert ok[0] > 50 and ok[1] > 50, f"broken or empty image: {ok}"


def iframe_context(page: Page, main_frame: str, since: int) -> int:
    """The script context of the result's iframe (created after event number ``since``)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        page.pump(0.25)
        frames = {k: v for k, v in page.frame_contexts(since).items() if k != main_frame}
        if frames:
            return max(frames.values())
    raise AssertionError("the result's iframe never got a script context")


LANDING_ORDER = (
    "(() => { const top = e => e ? e.getBoundingClientRect().top : Infinity;"
    " const prose = [...document.querySelectorAll('.prose p')]"
    ".find(p => p.textContent.startsWith('What was run'));"
    " return [top(document.querySelector('table.answer')),"
    " top(document.querySelector('.prose img')), top(prose)]; })()"
)


# the landing text's left edge and the sidebar's right edge, with a category open
LANDING_CLEAR = (
    "(() => { const nav = document.querySelector('nav').getBoundingClientRect();"
    " const text = document.querySelector('.prose').getBoundingClientRect();"
    " return [text.left, nav.right]; })()"
)
MAIL_LINKS = "document.querySelectorAll('a[href^=\"mailto:\"]').length"


def check_landing_clear_of_the_sidebar(page: Page, categories_: list[str], shots: Path) -> None:
    """With any category open (its sidebar wider than the menu's), at a laptop's width and
    a wide screen's, the landing text starts right of the sidebar."""
    for width in (1024, 1400):
        page.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        for category in categories_:
            open_category(page, category)
            left, sidebar = page.evaluate(LANDING_CLEAR)
            assert left >= sidebar, f"{category} at {width} px: text at {left}, sidebar {sidebar}"
        page.screenshot(shots / f"00-landing-category-open-{width}.png")
    page.call("Emulation.clearDeviceMetricsOverride")
    page.evaluate("app.setView({navbarMode: 'menu'})")


def check_html(page: Page, main_frame: str, path: str, since: int) -> str:
    """A table must have rows (a table with its header only is not in the report)."""
    context = iframe_context(page, main_frame, since)
    wait_for(page, "document.readyState === 'complete'", context=context)
    rows = page.evaluate("document.querySelectorAll('tbody tr').length", context)
    assert rows > 0, f"{path}: empty table"
    return f"{rows} rows"


def check_data(page: Page, path: str) -> str:
    """A tidy CSV travels inside the report (and its zip) whole: its header and its rows
    (none where the study had nothing to put there)."""
    uri = page.evaluate(f"results[{json.dumps(path)}].data_uri")
    assert uri.startswith("data:text/csv"), uri[:60]
    lines = base64.b64decode(uri.split("base64,", 1)[1]).decode("utf-8").splitlines()
    assert lines and "," in lines[0], f"{path}: no header"
    return f"{len(lines) - 1} rows of data"


def test_report_opens_on_the_findings_and_every_result_renders_offline(report):
    browser = find_browser()
    if browser is None:
        pytest.fail("no chromium: apt-get install -y chromium (.ci/run installs it)")
    shots = report.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    seen = {}
    with headless_page(browser, report.parent / "chromium-profile") as page:
        page.call("Page.navigate", url=report.as_uri())
        wait_for(page, "typeof app !== 'undefined' && typeof categories !== 'undefined'")
        main_frame = page.call("Page.getFrameTree")["frameTree"]["frame"]["id"]
        page.pump(1.0)
        landing = page.evaluate("document.body.innerText")
        assert "The answer." in landing and "beats 1 device from global batch" in landing
        # the chosen layout's loss, split by its control cells: the largest term named
        assert "loses efficiency (control cells)" in landing and "the largest is" in landing
        # a tie is named as one and decided by the rule the page states, never by a name
        assert "by name" not in landing and "the tie rule picks" in landing
        assert tracker_words(landing) == [], "the landing page speaks of the tracker"
        # the answer table and figure come before the prose (the notes, what was run)
        order = page.evaluate(LANDING_ORDER)
        assert order[0] < order[2] and order[1] < order[2], order
        # the study file's hostile description is shown as words and runs nothing
        assert "onerror=" in landing and page.evaluate("document.title") != "pwned"
        assert page.evaluate("document.querySelectorAll('img[onerror]').length") == 0
        page.screenshot(shots / "00-landing.png")
        # no source or address on the landing page is a mail link (docutils' autolink)
        assert page.evaluate(MAIL_LINKS) == 0
        order = page.evaluate("Object.keys(categories).sort((a, b) => a.localeCompare(b))")
        assert order[0] == FIRST_CATEGORY, order
        check_landing_clear_of_the_sidebar(page, order, shots)
        for number, category in enumerate(order, start=1):
            open_category(page, category)
            paths = page.evaluate(f"Object.values(categories[{json.dumps(category)}]).flat()")
            assert paths, f"category {category} is empty"
            for index, path in enumerate(paths):
                since = len(page.events)
                kind = show_result(page, path)
                page.pump(0.5)
                if kind == "data":
                    seen[path] = check_data(page, path)
                    continue
                if kind == "img":
                    check_image(page)
                    seen[path] = "image"
                else:
                    seen[path] = check_html(page, main_frame, path, since)
                    context = iframe_context(page, main_frame, since)
                    assert page.evaluate(MAIL_LINKS, context) == 0, f"{path}: a mailto: link"
                    text = page.evaluate("document.body.innerText", context)
                    assert tracker_words(text) == [], f"{path}: tracker words"
                name = f"{number:02d}-{index:02d}-{slug(Path(path).stem)}.png"
                page.screenshot(shots / name)
        page.pump(0.5)
        problems = page.problems()
    assert not problems, "\n".join(problems)
    names = {Path(p).name for p in seen}
    assert {
        "findings.html",
        "post_vs_run.html",
        "speedup.png",
        "mfu.png",
        "throughput.png",
        "loss_breakdown.png",
        "loss_breakdown.html",
    } <= names
    assert not any(name.endswith("_interactive.html") for name in names)  # one view a figure
    shown = [path for path, kind in seen.items() if not kind.endswith("of data")]
    assert len(list(shots.glob("*.png"))) == len(shown) + 3  # the landing, twice a category
    assert {"cells.csv", "fits.csv", "scaling.csv"} <= names, "tidy CSVs missing from the report"


def test_the_browser_check_catches_errors_requests_and_broken_images(tmp_path):
    """The checks above can fail: a page with a script error, a broken image and a request
    to the internet gets all three reported (and the request never reaches the network)."""
    browser = find_browser()
    if browser is None:
        pytest.fail("no chromium: apt-get install -y chromium (.ci/run installs it)")
    page_file = tmp_path / "bad.html"
    page_file.write_text(
        "<html><body><img id='i' src='missing.png'>"
        "<script src='https://cdn.example.org/vega.js'></script>"
        "<script>throw new Error('boom');</script></body></html>"
    )
    with headless_page(browser, tmp_path / "profile") as page:
        page.call("Page.navigate", url=page_file.as_uri())
        wait_for(page, "document.readyState === 'complete'")
        page.pump(1.0)
        broken = page.evaluate("document.getElementById('i').naturalWidth")
        problems = "\n".join(page.problems())
    assert broken == 0
    assert "boom" in problems
    assert "request outside the file: https://cdn.example.org/vega.js" in problems
    assert "missing.png" in problems or "failed load" in problems
