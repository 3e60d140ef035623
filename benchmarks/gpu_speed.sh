#!/usr/bin/env bash
# Issue 41's GPU measurement in one device call: benchmarks.gpu_speed at N = 4,096 and 512,
# batch 128, alone on the machine (about 5 minutes on one H100 or H200; stopped after LIMIT
# seconds, 360 by default, with every finished model already in the JSON). With CUDA_TESTS=1
# the CUDA cases of the curvature, layer and model tests run afterwards, never beside the
# timings (at most 240 s more). Writes under $OUT: device.txt, cuda.json (for benchmarks/results/gpu_speed/),
# gpu_speed.log and, with CUDA_TESTS=1, cuda-tests.{xml,log}.
#
# Usage (repository root of the GPU machine, with the wheels of ../shared/tools/gpu-wheels
# in .whl/):  OUT=... [LIMIT=360] [CUDA_TESTS=1] bash benchmarks/gpu_speed.sh
set -u
source benchmarks/gpu_setup.sh || exit 1
timeout "${LIMIT:-360}" python3 -m benchmarks.gpu_speed --device cuda --n 4096 --small-n 512 \
    --repeats 3 --train-epochs 10 --out "$OUT/cuda.json" > "$OUT/gpu_speed.log" 2>&1
echo "gpu_speed.py exit status $?" >> "$OUT/gpu_speed.log"
if [ "${CUDA_TESTS:-0}" = 1 ]; then
    start_cuda_tests
    wait
fi
grep -v "Warning\|warn" "$OUT/gpu_speed.log" | tail -n 12
