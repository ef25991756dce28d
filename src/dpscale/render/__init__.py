"""Report rendering: figures, interactive pages and HTML tables from the analysis' tables.

Imports plan, analysis and render (tests/unit/test_boundaries.py).
"""
