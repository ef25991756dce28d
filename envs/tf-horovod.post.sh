# Compile Horovod 0.28.1 against the TensorFlow installed from envs/tf-horovod.txt.
# Run by dpscale.launch.setup.envs with $PYTHON and $PIP set to the environment's interpreter and
# $DPSCALE_WHEELS to this environment's wheel cache (outside the checkout, keyed by the hash
# of this file and the requirements, the Python version and the platform).
#
# The compiled wheel is kept there, so a fresh clone on the same machine installs it in
# seconds instead of compiling for about 2 minutes; a changed TensorFlow pin or build
# variable is a new hash, so a wheel is never reused against another TF's ABI.
# --no-build-isolation: Horovod's setup.py must import the installed TensorFlow to find
# its headers and ABI flags; in an isolated build it cannot see it.
# --no-cache-dir: pip's own cache is keyed by the sdist only, blind to the TF it built against.
# This CPU machine uses Gloo for collectives and launches with `horovodrun --gloo`.
#
# CUDA cluster variant (with tensorflow[and-cuda] in the requirements and the CUDA toolkit
# and NCCL on the build node):
#   HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME=/path/to/nccl (if not in the CUDA tree)
#   HOROVOD_CUDA_HOME=/usr/local/cuda, and optionally HOROVOD_WITH_MPI=1 (drop
#   HOROVOD_WITHOUT_MPI) to launch with srun/mpirun instead of Gloo.
# Check the result with `horovodrun --check-build` (NCCL must be listed under
# "Available Tensor Operations").
wheel=$(ls "$DPSCALE_WHEELS"/horovod-0.28.1-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    mkdir -p "$(dirname "$DPSCALE_WHEELS")"
    staging=$(mktemp -d "$DPSCALE_WHEELS.building.XXXXXX")
    HOROVOD_WITH_TENSORFLOW=1 \
    HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_PYTORCH=1 \
    HOROVOD_WITHOUT_MXNET=1 \
    MAKEFLAGS=-j2 \
        $PIP wheel --no-build-isolation --no-cache-dir --no-deps -w "$staging" horovod==0.28.1
    mkdir -p "$DPSCALE_WHEELS"
    mv "$staging"/horovod-0.28.1-*.whl "$DPSCALE_WHEELS"/
    rm -rf "$staging"
    wheel=$(ls "$DPSCALE_WHEELS"/horovod-0.28.1-*.whl | head -n 1)
else
    echo "[dpscale] Horovod from the wheel cache: $wheel"
fi
$PIP install "$wheel"
$PYTHON -c "import horovod.tensorflow.keras"
