"""Inside a framework's environment, framework-free: the loop every rank runs.

Timing windows, the training loop, learning-rate rules, the dataset reader, fault deadlines,
the system description and the result records. Runs where only a framework and numpy are
installed (a site's interpreter or container, see dpscale.launch.setup.interpreters): imports plan
and runner, never scipy, yaml, pandas or plotting (tests/unit/test_boundaries.py).
"""
