# Compile Horovod 0.28.1 against the TensorFlow installed from envs/tf-horovod.txt.
# Run by dpscale.core.envs with $PYTHON and $PIP set to the environment's interpreter.
#
# --no-build-isolation: Horovod's setup.py must import the installed TensorFlow to find
# its headers and ABI flags; in an isolated build it cannot see it.
# --no-cache-dir: never reuse a Horovod wheel cached from a build against another TF (ABI).
# This CPU machine uses Gloo for collectives and launches with `horovodrun --gloo`.
#
# CUDA cluster variant (with tensorflow[and-cuda] in the requirements and the CUDA toolkit
# and NCCL on the build node):
#   HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME=/path/to/nccl (if not in the CUDA tree)
#   HOROVOD_CUDA_HOME=/usr/local/cuda, and optionally HOROVOD_WITH_MPI=1 (drop
#   HOROVOD_WITHOUT_MPI) to launch with srun/mpirun instead of Gloo.
# Check the result with `horovodrun --check-build` (NCCL must be listed under
# "Available Tensor Operations").
HOROVOD_WITH_TENSORFLOW=1 \
HOROVOD_WITH_GLOO=1 \
HOROVOD_WITHOUT_MPI=1 \
HOROVOD_WITHOUT_PYTORCH=1 \
HOROVOD_WITHOUT_MXNET=1 \
MAKEFLAGS=-j2 \
    $PIP install --no-build-isolation --no-cache-dir horovod==0.28.1
$PYTHON -c "import horovod.tensorflow.keras"
