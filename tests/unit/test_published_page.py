"""The published cases in the comm_model job (issue 50 item 4): their step writes the table,
the summary and a page where every predicted number is labelled extrapolated and keeps its
source; its inputs are the workflow's own files unless the config names others, checked with
one line naming the field; the landing page says what is extrapolated. The errors themselves
are what the check measures, not asserted here."""

from __future__ import annotations

import ast
import json
import math
import re
import shutil

import pandas as pd
import pytest
import yaml

from conftest import REPO
from dpscale.analysis.answers import published_summary as ps
from dpscale.plan import published
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.render.published_page import display_table
from dpscale.steps.published import check_table, published_cases
from helpers.report_text import LANDING, render

FILES = published.published_files({})
K80 = "tf-p2-k80-64-resnet50"  # 8 nodes
K80_CASE = next(case for case in published.read_cases(FILES["cases"]) if case["id"] == K80)
CHAINERMN = "https://chainer.org/general/2018/05/25/chainermn-v1-3.html"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, str]:
    """The step run once on the workflow's own files."""
    folder = tmp_path_factory.mktemp("published")
    outputs = {
        "table": str(folder / "published_cases.csv"),
        "top": str(folder / "published_cases_top.json"),
        "html": str(folder / "published_cases.html"),
    }
    published_cases(FILES, outputs, {})
    return outputs


def test_every_predicted_row_is_labelled_extrapolated_and_keeps_its_source(written):
    table = pd.read_csv(written["table"])
    predicted = table[table["status"].str.startswith("predicted")]
    assert len(predicted) >= 8
    assert predicted["basis"].str.startswith("extrapolated: borrowed compute profile").all()
    assert (predicted["kind"] == "extrapolated").all()
    assert predicted["source"].str.contains("http|@", regex=True).all()
    skipped = table[table["status"] == "not predicted"]
    assert (skipped["basis"] == "not predicted").all() and skipped["reason"].str.len().min() > 10
    # every row names the timeline it borrowed: the H200's, of its own model where timed;
    # the summary names the table's file in the repository, once
    shape = r"compute shape borrowed from one NVIDIA H200 (resnet\d+) (amp_bf16|fp32) torch-ddp"
    named = predicted["compute_source"].str.extract(shape)
    assert named.notna().all().all(), predicted["compute_source"].tolist()
    own = predicted["model"].isin(["resnet50", "resnet101"])
    assert (named[0][own] == predicted["model"][own]).all()
    assert predicted["assumptions"].str.startswith("compute shape borrowed from one").all()
    page = (REPO / written["html"]).read_text(encoding="utf-8")
    assert f"compute profile ({published.DEFAULT_PROFILE}) and nominal" in page


def test_the_page_leads_with_the_summary_and_the_landing_page_gets_one_sentence(written):
    page = (REPO / written["html"]).read_text(encoding="utf-8")
    table = pd.read_csv(written["table"])
    lines = ps.summary_lines(table, published.DEFAULT_PROFILE)
    assert "class='status-" not in page  # a row's status is text, not a CSS class
    assert "<ul class='summary'>" in page and page.index("summary") < page.index("<table>")
    assert lines[0].startswith(
        "Published multi-GPU results: every predicted number is extrapolated"
    )
    assert any(line.startswith("Scaling efficiency, predicted against published") for line in lines)
    assert any("the largest miss is" in line and "http" in line for line in lines)
    ratios = [line for line in lines if line.startswith("chainermn-mn1-10gbe")]
    assert len(ratios) == 2
    for line in ratios:
        assert "(extrapolated) against published" in line and CHAINERMN in line
    assert all(line.replace("&", "&amp;").replace("'", "&#x27;") in page for line in lines)
    # the landing page: one sentence, which way and how far, in the reader's words
    (landing,) = json.loads((REPO / written["top"]).read_text(encoding="utf-8"))
    assert "extrapolated" in landing and "efficiency points" in landing
    assert "predicted" in landing and landing.count(". ") <= 1


TRACKER_WORDS = re.compile(r"issue \d|target|\bmet\b|\blent\b", re.IGNORECASE)


def test_the_benchmark_and_the_rule_compute_the_same_table(written):
    from_rule = pd.read_csv(written["table"])
    direct = check_table(FILES["cases"], FILES["profile"])
    assert list(from_rule["id"]) == list(direct["id"])
    pd.testing.assert_series_equal(from_rule["predicted"], direct["predicted"], check_dtype=False)


def table_of(rows: list[dict]) -> pd.DataFrame:
    base = {
        "model": "resnet50",
        "devices": "",
        "link": "l",
        "metric": "scaling efficiency %",
        "published": math.nan,
        "error_points": math.nan,
        "error_pct": math.nan,
        "implied_gbit_s": math.nan,
        "implied_pct_of_nominal": math.nan,
        "link_kind": "",
        "kind": "extrapolated",
        "basis": "extrapolated: borrowed compute profile, nominal link",
        "compute_source": "",
        "assumptions": "a",
        "status": "predicted",
        "reason": "",
    }
    return pd.DataFrame([{**base, **row} for row in rows])


def test_the_summary_says_which_way_and_how_far_in_the_readers_words():
    table = table_of(
        [
            {"id": "a", "predicted": 90.0, "published": 85.0, "error_points": 5.0, "source": "s1"},
            {"id": "b", "predicted": 90.0, "published": 65.0, "error_points": 25.0, "source": "s2"},
            {"id": "c", "predicted": 90.0, "published": 88.0, "error_points": 2.0, "source": "s3"},
            {"id": "d", "predicted": 80.0, "published": 83.0, "error_points": -3.0, "source": "s6"},
            {"id": "r", "metric": "time ratio", "predicted": 1.3, "published": 3.0}
            | {"error_pct": -56.7, "source": "s4"},
            {"id": "n", "predicted": math.nan, "status": "not predicted", "reason": "no input"}
            | {"basis": "not predicted", "source": "s5"},
        ]
    )
    lines = ps.summary_lines(table)
    assert "5 of 6 cases predicted over 1 links" in lines[0]
    assert "No link-only figure has a measured spread: the published figures" in lines[0]
    assert lines[1].startswith(
        "Scaling efficiency, predicted against published: the model over-predicted 3 of 4 "
        "cases by a median of 5.0 efficiency points, and under-predicted 1 by a median of 3.0"
    )
    assert "Half the cases missed by at most 4.0 points" in lines[1]
    assert lines[1].endswith("the largest miss is 25.0 points, b (s2).")
    assert lines[2] == (
        "r, time ratio: predicted 1.30 (extrapolated) against published 3 (s4), 57% too low."
    )
    landing = ps.landing_line(table)
    assert "over-predicted 3 of 4 cases by a median of 5.0 efficiency points" in landing
    for text in (*lines, landing):
        assert not TRACKER_WORDS.search(text), text


def test_a_prediction_on_the_mark_is_neither_over_nor_under():
    words = ps.direction_words(pd.Series([0.0, 0.01, -2.0]))
    assert (
        words == "under-predicted 1 of 3 cases by a median of 2.0 efficiency points, and "
        "matched 2 to within 0.05 points"
    )
    assert ps.landing_line(table_of([])).startswith("Published multi-GPU results: no case")


def test_the_page_shows_efficiencies_ratios_and_their_errors_in_their_units():
    table = table_of(
        [
            {"id": "e", "predicted": 91.08, "published": 90.0, "error_points": 1.08, "source": "s"}
            | {"implied_gbit_s": 1.604, "implied_pct_of_nominal": 16.04, "link_kind": "tcp"},
            {"id": "r", "metric": "time ratio", "predicted": 1.284, "published": 3.06}
            | {"error_pct": -58.1, "source": "s"},
            {"id": "n", "predicted": math.nan, "status": "not predicted", "reason": "no input"}
            | {"basis": "not predicted", "source": "s"},
        ]
    )
    shown = display_table(table).set_index("id")
    assert shown.loc["e", ["predicted", "published", "error"]].tolist() == [
        "91.1%",
        "90.0%",
        "+1.1 pts",
    ]
    assert shown.loc["r", ["predicted", "published", "error"]].tolist() == [
        "1.28",
        "3.06",
        "-58.1%",
    ]
    assert (
        shown.loc["n", "status or reason"] == "not predicted: no input"
        and shown.loc["n", "predicted"] == ""
    )
    assert shown.loc["e", "basis"].startswith("extrapolated")
    implied = shown["link rate the published figure implies"]
    assert implied.to_dict() == {"e": "1.6 Gbit/s (16% of nominal)", "r": "", "n": ""}
    # the page keeps the prediction's own assumptions; the case's notes stay in cases.yaml
    notes = table.assign(assumptions="ring at the nominal rate || case: no link log published")
    assumed = display_table(notes).set_index("id")["assumptions (the case's own notes: cases.yaml)"]
    assert assumed.to_dict() == {
        "e": "ring at the nominal rate",
        "r": "ring at the nominal rate",
    } | {
        "n": ""  # not predicted: nothing assumed, its status says why
    }


def test_another_profile_is_named_as_what_it_is(tmp_path):
    """A study's own bucket_timeline.csv, from before it named its precision, serves every
    case as the one shape there is, named by its model."""
    profile = pd.read_csv(FILES["profile"]).drop(columns=["precision", "gpus"])
    profile = profile[profile["cell_id"].str.contains("resnet50.*b256")]
    profile = profile[profile["cell_id"] == profile["cell_id"].iloc[0]]
    profile["model"] = "resnet18-imagenet64-c10"
    path = tmp_path / "bucket_timeline.csv"
    profile.to_csv(path, index=False)
    published.check_published({"published_cases": {"profile": str(path)}})
    table = check_table(FILES["cases"], path).set_index("id")
    row = table.loc["horovod-512-vgg16"]
    assert (
        "one device resnet18 (precision not recorded) torch-ddp timeline (4 buckets, batch 256)"
        in row["compute_source"]
    )
    assert "vgg16 takes resnet18's compute shape" in row["assumptions"]


def test_the_defaults_are_the_workflows_files_and_an_install_ships_them():
    expected = {name: str(REPO / path) for name, path in published.DEFAULTS.items()}
    assert published.published_files({}) == expected
    published.check_published({})
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    shipped = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "WORKFLOW_FILES"
    )
    manifest = (REPO / "MANIFEST.in").read_text(encoding="utf-8").split()
    for default in (published.DEFAULT_CASES, published.DEFAULT_PROFILE):
        assert any(default == name or default.startswith(f"{name}/") for name in shipped)
        assert default in manifest or default.split("/")[0] in manifest


def two_timelines(tmp_path) -> str:
    profile = pd.read_csv(FILES["profile"])
    other = profile.assign(strategy="another-strategy")
    path = tmp_path / "two.csv"
    pd.concat([profile, other]).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("cases", "missing.yaml", "published_cases.cases: 'missing.yaml' is not a file"),
        ("cases", "{tmp}", "is not a file"),
        ("cases", "{tmp}/no_cases.yaml", "has no list of cases"),
        ("cases", "{tmp}/no_id.yaml", "cases[0] has no id"),
        ("cases", "{tmp}/broken.yaml", "YAML syntax error"),
        ("cases", "{tmp}/servers.yaml", f"cases[0] ({K80}).traffic.servers: 9 is not allowed"),
        ("cases", "{tmp}/servers_text.yaml", f"cases[0] ({K80}).traffic.servers: 'four' is not"),
        ("profile", "missing.csv", "published_cases.profile: 'missing.csv' is not a file"),
        ("profile", published.DEFAULT_CASES, "lacks column 'cell_id'"),
        ("profile", "{two}", "holds 2 strategies' timelines of ('resnet101-imagenet224-c1000'"),
        ("profile", "{none}", "holds no one-rank timeline"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_field(tmp_path, key, value, expected):
    (tmp_path / "no_cases.yaml").write_text("other: 1\n")
    (tmp_path / "no_id.yaml").write_text("cases:\n  - {model: resnet50}\n")
    (tmp_path / "broken.yaml").write_text("cases: [\n")
    for name, servers in (("servers", 9), ("servers_text", "four")):
        case = {**K80_CASE, "traffic": {"kind": "parameter_servers", "servers": servers}}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"cases": [case]}))
    none = tmp_path / "none.csv"
    pd.read_csv(FILES["profile"]).assign(world_size=2).to_csv(none, index=False)
    value = value.format(tmp=tmp_path, two=two_timelines(tmp_path), none=none)
    with pytest.raises(ConfigError) as error:
        published.check_published({"published_cases": {key: value}})
    message = str(error.value)
    assert message.startswith(f"published_cases.{key}: ") and "\n" not in message
    assert expected in message


def test_the_study_config_checks_the_key(default_config, tmp_path):
    default_config["published_cases"] = {"cases": str(tmp_path / "none.yaml")}
    with pytest.raises(ConfigError, match=r"^published_cases\.cases: "):
        plan_study(default_config, STRATEGIES)
    default_config["published_cases"] = {"profile": 3}
    with pytest.raises(ConfigError, match="published_cases.profile"):
        plan_study(default_config, STRATEGIES)
    copy = tmp_path / "cases.yaml"
    shutil.copy(FILES["cases"], copy)
    default_config["published_cases"] = {"cases": str(copy)}
    checked = plan_study(default_config, STRATEGIES)[0]
    assert published.published_files(checked)["cases"] == str(copy)


def test_the_landing_page_says_what_is_extrapolated_and_shows_the_published_lines():
    lines = ["Published multi-GPU results: every predicted number is extrapolated, ...", "Median x"]
    config = {**LANDING, "published_lines": lines}
    landing = render("workflow.rst", config)
    assert "**Measured or extrapolated.**" in landing
    assert "the published multi-GPU results predicted from a borrowed one-device" in landing
    assert all(f"- {line}" in landing for line in lines)
    assert "\n\n**What was run.**" in render("workflow.rst", {**config, "published_lines": []})
    caption = render("published_cases.rst", {"published_lines": lines})
    assert "every predicted number is extrapolated" in caption and f"- {lines[1]}" in caption


def test_the_caption_names_the_profile_the_workflow_reads():
    """Issue 77: the page's caption named an H100 timeline while the rule read the H200
    profiles: it names the default profile's file and the GPU that profile was timed on."""
    caption = " ".join(render("published_cases.rst", {"published_lines": []}).split())
    profile = pd.read_csv(REPO / published.DEFAULT_PROFILE)
    (gpu,) = set(profile["gpus"])
    assert published.DEFAULT_PROFILE in caption
    assert f"one {gpu.removeprefix('NVIDIA ')}'s torch-ddp timelines" in caption
    assert "H100" not in caption and set(profile["strategy"]) == {"torch-ddp"}
