"""`dpscale published FILE`: any cases file checked and predicted as a study's
published-cases step does (the same table and page), and a bad file told one line per bad
field, outside any study."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from conftest import REPO
from dpscale import cli
from dpscale.plan.published import DEFAULTS
from dpscale.steps.published import OUT_FILES, published_cases

DEFAULT_CASES = REPO / DEFAULTS["cases"]
PROFILE = REPO / DEFAULTS["profile"]
# two cases that stand alone (no borrowed figure, no reference), in the file's order: eight
# nodes and one
KEPT = ("tf-p2-k80-64-resnet50", "dle-pyt-dgx1v-fp32-8")


def cases_file(tmp_path, change=None) -> str:
    """A cases file of the KEPT cases from the workflow's own, each changed by ``change``."""
    cases = yaml.safe_load(DEFAULT_CASES.read_text("utf-8"))["cases"]
    kept = [case for case in cases if case["id"] in KEPT]
    for case in kept:
        (change or (lambda case: None))(case)
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": kept}, sort_keys=False), encoding="utf-8")
    return str(path)


def test_a_good_file_prints_the_steps_table_and_writes_its_page(tmp_path, capsys):
    path = cases_file(tmp_path)
    cli.main(["published", path, "--profile", str(PROFILE), "--out", str(tmp_path / "cli")])
    printed = capsys.readouterr().out
    for case_id in KEPT:
        assert case_id in printed
    assert "every predicted number is extrapolated" in printed
    # the study's step on the same files: the same table, summary and page
    step = {name: tmp_path / "step" / file for name, file in OUT_FILES.items()}
    published_cases({"cases": path, "profile": str(PROFILE)}, step, {})
    for name, file in OUT_FILES.items():
        written = (tmp_path / "cli" / file).read_text(encoding="utf-8")
        assert written == step[name].read_text(encoding="utf-8"), name
    table = pd.read_csv(tmp_path / "cli" / OUT_FILES["table"])
    assert list(table["id"]) == list(KEPT)
    assert table["status"].str.startswith("predicted").all()


def test_the_profile_defaults_to_the_workflows_own(tmp_path, capsys):
    cli.main(["published", cases_file(tmp_path)])
    assert "compute shape borrowed from one NVIDIA H200" in capsys.readouterr().out


def break_three_fields(case) -> None:
    """The one-node case with a float batch and no model; the other with an unknown wire
    precision."""
    if case["nodes"] == 1:
        case["per_device_batch"] = 64.0
        del case["model"]
    else:
        case["wire_precision"] = "fp8"


def test_a_bad_file_is_one_line_per_bad_field(tmp_path):
    path = cases_file(tmp_path, break_three_fields)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["published", path, "--out", str(tmp_path / "out")])
    lines = str(exit_.value.code).splitlines()
    assert all(line.startswith(f"dpscale: {path}: cases[") for line in lines), lines
    named = {(line.split(" ")[2], line.split(").", 1)[1].split(":")[0]) for line in lines}
    expected = {
        ("cases[0]", "wire_precision"),
        ("cases[1]", "per_device_batch"),
        ("cases[1]", "model"),
    }
    assert named == expected and len(lines) == 3, lines
    assert not (tmp_path / "out").exists()


def test_rules_across_fields_are_checked_once_every_field_is_typed(tmp_path):
    def wrong_total(case) -> None:
        case["devices_total"] = case["devices_total"] + 1

    with pytest.raises(SystemExit) as exit_:
        cli.main(["published", cases_file(tmp_path, wrong_total)])
    lines = str(exit_.value.code).splitlines()
    assert len(lines) == 2 and all(".devices_total: " in line for line in lines), lines


@pytest.mark.parametrize(
    ("text", "words"),
    [("cases: []\n", "has no list of cases"), ("name: x\n", "has no list of cases")],
)
def test_a_file_without_cases_is_one_line(tmp_path, text, words):
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["published", str(path)])
    message = str(exit_.value.code)
    assert words in message and "\n" not in message


def test_its_help_says_what_it_does_and_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        cli.main(["published", "--help"])
    text = capsys.readouterr().out
    usage, description = text.split("\n\n")[:2]
    assert usage.startswith("usage: dpscale published") and description.endswith(".")
    assert "example: dpscale published studies/published/cases.yaml" in text


SOURCE_FORMS = {
    "a repository's file": {"repository": "NVIDIA/DeepLearningExamples", "path": "README.md"},
    "an issue thread": {
        "repository": "horovod/horovod",
        "url": "https://github.com/horovod/horovod/issues/1234",
    },
    "a pull request without its URL": {"repository": "pytorch/pytorch", "path": ""},
    "a web page": {"url": "https://example.org/benchmarks.html"},
    "a paper": {"title": "Accurate, Large Minibatch SGD", "doi": "10.48550/arXiv.1706.02677"},
    "a path of a folder only": {"repository": "tensorflow/benchmarks", "path": "."},
}


@pytest.mark.parametrize("form", SOURCE_FORMS, ids=list(SOURCE_FORMS))
def test_every_source_form_prints_the_table_never_a_traceback(tmp_path, capsys, form):
    """A case's source may be a repository file, an issue or pull request, a web page or a
    paper: each is one group for the interval, and the command prints its table."""

    def cite(case) -> None:
        case["source"] = dict(SOURCE_FORMS[form], quote=case["source"].get("quote", "x"))

    cli.main(["published", cases_file(tmp_path, cite), "--profile", str(PROFILE)])
    printed = capsys.readouterr().out
    assert all(case_id in printed for case_id in KEPT)


def test_each_source_form_is_one_group_of_its_own():
    from dpscale.analysis.answers.published_intervals import source_key

    keys = {form: source_key(source) for form, source in SOURCE_FORMS.items()}
    assert len(set(keys.values())) == len(keys), keys
    assert keys["a repository's file"] == "NVIDIA/DeepLearningExamples:README"
    assert keys["an issue thread"] == "https://github.com/horovod/horovod/issues/1234"
    assert keys["a paper"] == "10.48550/arXiv.1706.02677"


def test_a_series_file_given_adds_its_series_and_prints_its_own_record_apart(tmp_path, capsys):
    """One published series of the workflow's, renamed so that it is the user's own: the
    record over every series carries it, and its own record is printed apart, with each
    source's medians."""
    series = yaml.safe_load((REPO / "studies" / "published" / "series.yaml").read_text("utf-8"))
    first = series["cases"][0]["series"]
    mine = [dict(case) for case in series["cases"] if case["series"] == first]
    for case in mine:
        case["id"], case["series"] = f"mine-{case['id']}", f"mine-{first}"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"cases": mine}, sort_keys=False), encoding="utf-8")
    cli.main(["published", str(path), "--profile", str(PROFILE)])
    printed = capsys.readouterr().out
    assert "This file's own series alone: checked on 1 published series" in printed
    assert "By source: " in printed and " series: law " in printed


def test_the_record_a_prediction_carries_gives_each_source_s_medians():
    from dpscale.steps.published import series_record

    record = series_record()
    assert "; by source, " in record
    assert "Oneflow-Inc/DLPerf 8 series: law " in record  # the most series first
