"""Before any cell: per-framework environments and their locks (``envs``), a site's own
interpreters and their probe (``interpreters``), and the prepared datasets (``dataprep``, the
sources and command line; ``dataset_files``, the format written).

Imports no other room of launch (tests/unit/test_boundaries.py).
"""
