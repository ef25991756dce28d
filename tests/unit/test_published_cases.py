"""studies/published/cases.yaml, the published multi-GPU results the cluster prediction is
checked against (issue 50): every case says what was run, what was published and where, in
words a reader can find in the source; enough cases, over enough networks."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO

CASES = yaml.safe_load((REPO / "studies" / "published" / "cases.yaml").read_text("utf-8"))["cases"]
IDS = [case["id"] for case in CASES]


def test_at_least_eight_cases_on_at_least_three_networks_between_nodes():
    assert len(IDS) == len(set(IDS)) >= 8
    between_nodes = {case["inter_node_link"]["name"] for case in CASES if case["nodes"] > 1}
    assert len(between_nodes) >= 3, between_nodes


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_case_names_its_run_its_published_number_and_its_source(case):
    for key in ("model", "gpu", "precision", "framework", "assumptions"):
        assert case.get(key) is not None, key
    assert isinstance(case["nodes"], int) and isinstance(case["devices_per_node"], int)
    assert case["devices_total"] == case["nodes"] * case["devices_per_node"]
    published = case["published"]
    assert {"kind", "value", "unit"} <= set(published) and published["value"] is not None
    source = case["source"]
    assert source.get("url") or (source.get("repository") and source.get("commit")), source
    value = published["value"]
    if isinstance(value, int | float):  # a number is copied as the source prints it
        assert f"{value:g}" in source["quote"], (value, source["quote"][:200])
    else:
        assert source["quote"].strip(), "a published statement in words keeps its quote"


def test_post_003s_chainermn_ratios_are_the_published_hours():
    hours = {c["id"]: c["published"]["value"] for c in CASES if c["id"].startswith("chainermn-mn1")}
    derived = next(c["derived"] for c in CASES if c["id"] == "chainermn-mn1-ibfdr-32")
    ib = hours["chainermn-mn1-ibfdr-32"]
    assert derived["ratio_10gbe_over_ib"] == pytest.approx(
        hours["chainermn-mn1-10gbe-32"] / ib, 1e-4
    )
    assert derived["ratio_10gbe_dbuf_fp16_over_ib"] == pytest.approx(
        hours["chainermn-mn1-10gbe-dbuf-fp16-32"] / ib, 1e-4
    )
