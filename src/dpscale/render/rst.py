"""Text from a study file or from results, made safe to paste into the report's
reStructuredText: one line (no directive, such as ``.. raw:: html``, can start), every markup
character escaped (no role, link target or substitution), and no URI scheme recognised (no
``javascript:`` link), nor an address (a source's ``path@commit`` is no ``mailto:`` link).
docutils escapes HTML itself."""

from __future__ import annotations

import re

MARKUP = re.compile(r"([\\*`_|:<>\[\]@])")


def plain_text(text: str) -> str:
    """``text`` as literal words in a paragraph of reStructuredText."""
    one_line = " ".join(str(text).split())
    escaped = MARKUP.sub(r"\\\1", one_line)
    return "\\" + escaped if escaped.startswith((".", "-", "+", "#")) else escaped
