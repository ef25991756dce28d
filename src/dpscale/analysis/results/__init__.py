"""Results into tidy tables: cells, windows and systems, MFU, bucket timelines, collectives,
imported logs, which of a cell's two measurements counts, and which rows an analysis reads.

The lowest stage of analysis: imports no other (tests/unit/test_boundaries.py).
"""
