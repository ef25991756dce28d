"""Python's temporary files of a cell's processes go to the launch's scratch folder.

The launcher makes a scratch folder for every cell (``DPSCALE_SCRATCH``) and removes it after
the cell, whatever happened. Frameworks write temporary files and never delete them:
TensorFlow's autograph leaves each traced function's source (4 files a rank in a synthetic
horovod-tf cell), torchrun an empty log folder (``torchelastic_*``) a cell, torch an
inductor folder (``torchinductor_<user>``). Pointed at the scratch folder, they go with it
instead of piling up in /tmp.

Only Python's :mod:`tempfile` of this process moves. ``TMPDIR``, where Gloo, MPI and
ps-lite may put sockets (whose paths must stay short), stays as the user set it.
"""

from __future__ import annotations

import os
import tempfile

SCRATCH_VARIABLE = "DPSCALE_SCRATCH"


def keep_temporary_files_in_scratch() -> None:
    """``tempfile`` uses the launch's scratch folder from here on, where there is one."""
    scratch = os.environ.get(SCRATCH_VARIABLE)
    if scratch and os.path.isdir(scratch):
        tempfile.tempdir = scratch
