#!/usr/bin/env bash
# Issue 41's GPU measurement in one device call, each step alone on the machine:
# 1. benchmarks.gpu_speed at N = 4,096 and 512, batch 128, for MODELS (F-FC+CONV, CONV and the
#    stock CNN by default, in that order; add f-fc+conv+gconv), the F-FC+CONV fits also with the
#    GPU's eigensolver (host_eigenvalues=False), and epochs and training runs under
#    torch.compile in COMPILE_MODE (reduce-overhead: CUDA graphs; "" skips them), stopped after
#    SPEED_LIMIT seconds (300 by default; every finished model is already in the JSON);
# 2. benchmarks.gpu_scale (Table 1's runs at 60,000 images: an epoch and a fit, extrapolated to
#    100 and 1,000 epochs; SCALE_RUNS names some of its runs; SCALE_COMPILE_MODE compiles their
#    MAP steps), stopped after SCALE_LIMIT seconds (110 by default; 0 skips it);
# 3. benchmarks.relax_speed (a relaxed ResNet-18 against the original), stopped after
#    RELAX_LIMIT seconds (90 by default; 0 skips it), into relax_speed-cuda.json;
# 4. with CUDA_TESTS=1, the CUDA cases of the curvature, layer and model tests (TEST_LIMIT
#    seconds, 60 by default).
# About 7.5 minutes in all on one H100 or H200. Writes under $OUT: device.txt, cuda.json and
# scale.json (for benchmarks/results/gpu_speed/), gpu_speed.log, gpu_scale.log and, with
# CUDA_TESTS=1, cuda-tests.{xml,log}.
#
# Usage (repository root of the GPU machine, with the wheels of ../shared/tools/gpu-wheels
# in .whl/):  OUT=... [MODELS="..."] [SPEED_LIMIT=200] [SCALE_LIMIT=110] [SCALE_RUNS="..."]
#     [COMPILE_MODE=reduce-overhead] [SCALE_COMPILE_MODE=...] [CUDA_TESTS=1]
#     bash benchmarks/gpu_speed.sh
set -u
source benchmarks/gpu_setup.sh || exit 1
COMPILE_MODE=${COMPILE_MODE-reduce-overhead}
# shellcheck disable=SC2086
timeout "${SPEED_LIMIT:-300}" python3 -m benchmarks.gpu_speed --device cuda --n 4096 \
    --small-n 512 --repeats 2 --train-epochs 10 --models ${MODELS:-f-fc+conv conv stock-cnn} \
    ${COMPILE_MODE:+--compile-mode $COMPILE_MODE} \
    --out "$OUT/cuda.json" > "$OUT/gpu_speed.log" 2>&1
echo "gpu_speed exit status $?" >> "$OUT/gpu_speed.log"
grep -v "Warning\|warn" "$OUT/gpu_speed.log" | cut -c1-400 | tail -n 8
if [ "${SCALE_LIMIT:-110}" != 0 ]; then
    # shellcheck disable=SC2086
    timeout "${SCALE_LIMIT:-110}" python3 -m benchmarks.gpu_scale --device cuda --epochs 3 \
        ${SCALE_RUNS:+--runs $SCALE_RUNS} ${SCALE_COMPILE_MODE:+--compile-mode $SCALE_COMPILE_MODE} \
        --out "$OUT/scale.json" > "$OUT/gpu_scale.log" 2>&1
    echo "gpu_scale exit status $?" >> "$OUT/gpu_scale.log"
    grep -v "Warning\|warn" "$OUT/gpu_scale.log" | tail -n 8
fi
if [ "${RELAX_LIMIT:-90}" != 0 ]; then
    # issue 68: the relaxed ResNet-18 against the original (epoch and Kron fits)
    timeout "${RELAX_LIMIT:-90}" python3 -m benchmarks.relax_speed --device cuda --n 1024 \
        --batch 128 --repeats 2 --out "$OUT/relax_speed-cuda.json" > "$OUT/relax_speed.log" 2>&1
    echo "relax_speed exit status $?" >> "$OUT/relax_speed.log"
    tail -n 5 "$OUT/relax_speed.log"
fi
if [ "${CUDA_TESTS:-0}" = 1 ]; then
    TEST_LIMIT=${TEST_LIMIT:-60} start_cuda_tests
    wait
    tail -n 3 "$OUT/cuda-tests.log"
fi
