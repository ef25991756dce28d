"""Interactive figures: self-contained (no script from the network), tooltips, legend toggle."""

import json
import re

import pandas as pd
import pytest
from test_findings import write_results

from conftest import aggregate
from dpscale.steps.findings import interactive_figures


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("interactive")
    tables = root / "tables"
    aggregate(tables, write_results(root))
    out = {"throughput": root / "throughput.html", "speedup": root / "speedup.html"}
    inputs = {name: tables / f"{name}.csv" for name in ("cells", "fits", "scaling")}
    interactive_figures(inputs, out, {})
    return {name: path.read_text() for name, path in out.items()}


def spec_of(page: str) -> dict:
    """The Vega-Lite specification embedded in an Altair page."""
    match = re.search(r"(?:const|var) spec = (\{.*?\});\n", page, re.S)
    assert match, "no Vega-Lite spec found in the page"
    return json.loads(match.group(1))


@pytest.mark.parametrize("name", ["throughput", "speedup"])
def test_pages_are_self_contained(pages, name):
    page = pages[name]
    sources = re.findall(r"<script[^>]*\bsrc\s*=\s*['\"]([^'\"]+)", page, re.I)
    assert sources == []
    assert "vegaEmbed" in page and len(page) > 100_000  # the JavaScript is inside
    assert not re.search(r"(href|src)\s*=\s*['\"]https?://", page)


@pytest.mark.parametrize("name", ["throughput", "speedup"])
def test_legend_toggles_strategies_and_points_have_tooltips(pages, name):
    text = json.dumps(spec_of(pages[name]))
    assert '"bind": "legend"' in text and '"fields": ["strategy"]' in text
    assert '"tooltip"' in text


def test_throughput_page_carries_the_fitted_law(pages):
    text = json.dumps(spec_of(pages["throughput"]))
    assert "fitted_img_s" in text and '"t_c"' in text


def test_no_cells_gives_a_message_not_an_error(tmp_path):
    from dpscale.render import interactive

    empty = pd.DataFrame(columns=["status", "mode", "strategy", "model", "world_size"])
    chart = interactive.throughput_chart(empty, pd.DataFrame(columns=["status", "mode"]))
    path = tmp_path / "t.html"
    interactive.save_inline(chart, path)
    assert "No successful throughput cells" in path.read_text()
