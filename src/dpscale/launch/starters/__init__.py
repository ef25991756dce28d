"""The framework launchers dpscale provides, each run as ``python -m``: ``horovodrun``
without its Gloo build check, ``torchrun`` without finalization once its ranks ended well,
Horovod's Gloo rendezvous for ranks another launcher starts (``horovod_gloo``), MXNet's
parameter-server jobs (``mxnet_ps``).

The launch kinds name them; nothing imports them. They import a free port and how ranks
ended from the top of launch, no other room (tests/unit/test_boundaries.py).
"""
