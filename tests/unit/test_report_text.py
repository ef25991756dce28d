"""Text from a study file or from results reaches the report as plain words: no directive,
role, link or HTML of its own (render.rst.plain_text, used by workflow/rules/common.smk)."""

from __future__ import annotations

import pytest
from docutils.core import publish_parts

from dpscale.render.rst import plain_text

HOSTILE = [
    'x\n\n.. raw:: html\n\n   <img src=x onerror="document.title=1">\n',
    '.. raw:: html\n\n   <script>document.title="pwned"</script>',
    "javascript:alert(document.domain)",
    "`click <javascript:alert(1)>`_",
    ":raw-html:`<b>bold</b>` and |sub| and [#]_ and name_",
    "- a list\n* another\n#. numbered",
    "user@example.org",
    "https://www.tensorflow.org/x tensorflow/tensorflow:docs_src/benchmarks.md@5984ffefd320",
]


def html_of(text: str) -> str:
    """The paragraph as Snakemake's report renders its captions (raw HTML allowed)."""
    rst = f"dpscale study: {plain_text(text)}"
    return publish_parts(rst, writer="html", settings_overrides={"raw_enabled": True})["body"]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_renders_as_one_literal_paragraph(text):
    html = html_of(text)
    assert html.count("<p>") == 1 and "<script" not in html and "<img" not in html
    assert "<a " not in html and "<ul" not in html and "<ol" not in html
    assert "system-message" not in html  # docutils parsed it without complaint


def test_the_words_survive():
    html = html_of("ResNet-50 *on* 2_nodes: 1.5x `fast` | 10 GbE <tag>")
    assert "ResNet-50 *on* 2_nodes: 1.5x `fast` | 10 GbE &lt;tag&gt;" in html


def test_a_source_at_a_commit_is_words_not_a_mail_link():
    html = html_of(
        "tensorflow/tensorflow:tensorflow/docs_src/performance/benchmarks.md@5984ffefd320"
    )
    assert "mailto:" not in html and "<a " not in html
    assert "benchmarks.md&#64;5984ffefd320" in html or "benchmarks.md@5984ffefd320" in html
