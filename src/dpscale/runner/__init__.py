"""Inside a framework's environment, framework-free: the loop every rank runs.

Timing windows, the training loop, learning-rate rules, the dataset reader, fault deadlines,
the system description and the result records. Runs where only a framework, numpy and scipy
are installed: imports plan and runner, never pandas or plotting (tests/unit/test_boundaries.py).
"""
