#!/usr/bin/env bash
# KFAC against the exact GGN for every F-FC and CONV weight of layers 1-8 of trained runs, on
# one GPU, and the CUDA cases of the tests, in one call.
#
# One studies/exact_blocks.py process per run, side by side (each at most 18 GB of GPU
# memory at 32,768 numbers a tensor), each stopped after LIMIT seconds, while the CUDA cases
# of the curvature, layer, model and lengthscale tests run beside them. Writes under $OUT:
# device.txt, cuda-tests.xml/.log, one JSON file per run and exact-blocks.log.
#
# Usage (repository root of the GPU machine, with the wheels of ../shared/tools/gpu-wheels
# in .whl/ and each run folder holding results.json and model.pt):
#     RUNS="runs/a runs/b runs/c" OUT=... LIMIT=400 bash studies/gpu_exact_blocks.sh
set -u
source benchmarks/gpu_setup.sh || exit 1
RUNS=${RUNS:?set RUNS to the trained run folders}
LIMIT=${LIMIT:-400}
start_cuda_tests
for run in $RUNS; do
    name=$(basename "$run")
    timeout "$LIMIT" python3 -m studies.exact_blocks "$run" --device cuda --max-size 32768 \
        --pattern '^layer[1-8]\.(fc\.(input|output)_map|conv)\.weight$' --threads 4 \
        --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1 &
done
wait
for run in $RUNS; do
    name=$(basename "$run")
    { echo "== $name"; cat "$OUT/$name.log"; } >> "$OUT/exact-blocks.log" && rm "$OUT/$name.log"
done
tail -n 3 "$OUT/cuda-tests.log"
tail -n 30 "$OUT/exact-blocks.log"
