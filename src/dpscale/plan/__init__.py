"""Plan time: what a study is, before anything runs, and the vocabulary every side shares.

The study config, its matrix of cells, what a strategy declares, the ResNet specification,
the result schema and the ring all-reduce law. Imported by every other side, so it imports
only itself, the standard library, PyYAML and jsonschema (tests/unit/test_boundaries.py).
"""
