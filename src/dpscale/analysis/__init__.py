"""Analysis: results -> tidy tables, fitted laws, findings and predictions (pandas, scipy).

Imports plan and analysis only: no plotting, no framework (tests/unit/test_boundaries.py).
Three stages, each a sub-package that imports only the stages below it: results (tidy
tables), laws (fits and models), answers (findings, remedies, cost).
"""
