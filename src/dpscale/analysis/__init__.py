"""Analysis: results -> tidy tables, fitted laws, findings and predictions (pandas, scipy).

Imports plan and analysis only: no plotting, no framework (tests/unit/test_boundaries.py).
"""
