#!/usr/bin/env bash
# One prepared call on a lent GPU machine: the given GPU studies' cells, measured without
# Snakemake, then analysed here. With no study named, issue 51's per-model compute profiles
# (bucket timelines) for ResNet-18/50/101 at amp_bf16 and fp32, and an out-of-memory cell
# followed by a normal one. Run from the repository root, with .whl (jsonschema and its needs,
# Python 3.12 wheels) carried:
#   bash benchmarks/gpu_profiles.sh DEADLINE_S [STUDY.yaml...]
# Writes $OUT/machine.txt, $OUT/device_run.log and $OUT/results.tar.gz (results/gpu_*).
set -u
deadline_s=${1:-400}
shift || true
studies=("$@")
if [ ${#studies[@]} -eq 0 ]; then
    studies=(studies/gpu/profiles_amp_bf16.yaml studies/gpu/oom_then_next.yaml studies/gpu/profiles_fp32.yaml)
fi
out=${OUT:-/tmp/gpu_profiles_out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi
    python3 -c 'import torch; free, total = torch.cuda.mem_get_info(); print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0), "free/total MiB", free >> 20, total >> 20)'
    nproc
    git rev-parse HEAD 2>/dev/null || echo "commit: (no .git on the device)"
} > "$out/machine.txt" 2>&1
start=$(date +%s)
python3 -m dpscale.launch.without_snakemake "${studies[@]}" \
    --interpreter python3 --deadline-s "$deadline_s" 2>&1 | tee "$out/device_run.log"
echo "dpscale: the runner took $(($(date +%s) - start)) s" | tee -a "$out/device_run.log"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$out/machine.txt" 2>&1
tar -czf "$out/results.tar.gz" results/gpu_* 2>/dev/null
ls -la "$out"
