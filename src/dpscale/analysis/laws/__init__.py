"""Laws and models fitted to the tidy tables: the throughput law and break-even batch, the
alpha-beta fits of collectives, scaling and drift, accuracy statistics, the communication
model (commmodel), and numbers in words, which the laws and the answers share.

Imports analysis.results, never analysis.answers (tests/unit/test_boundaries.py).
"""
