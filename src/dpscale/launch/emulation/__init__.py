"""Emulated nodes on one machine: network namespaces joined through a shaped switch
(``netns``), and srun's stand-in that starts one task per rank inside them (``netns_run``).

Imports no other room of launch (tests/unit/test_boundaries.py); ``netns_run`` runs with a
framework environment's Python, stdlib only.
"""
