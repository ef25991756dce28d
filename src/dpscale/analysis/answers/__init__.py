"""Answers from the tables and the laws: findings and verdicts, the communication remedies
compared and ranked, cost, start-up, the answer paragraph, two studies compared, the source
posts beside the run.

The top stage of analysis: imports analysis.results and analysis.laws
(tests/unit/test_boundaries.py).
"""
