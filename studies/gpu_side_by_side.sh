#!/usr/bin/env bash
# Train the runs a run list names side by side on one GPU machine, one CPU thread each.
#
# A run list has one line per kind of run, `NAME ARGS...` (lines starting with # skipped);
# every kind runs for each seed in SEEDS as `laplace-equivariance train ARGS --device cuda
# --threads 1 --seed S --out runs/NAME-seedS`, each stopped after LIMIT seconds. With
# CUDA_TESTS=1 the CUDA cases of the tests run beside them (gpu_setup.sh). Writes under
# $OUT: device.txt and runs.tgz (each run's results.json, plots and console log; no model or
# checkpoint files).
#
# Usage (repository root of the GPU machine, with the wheels of ../shared/tools/gpu-wheels
# in .whl/):  LIMIT=500 OUT=... bash studies/gpu_side_by_side.sh studies/runs/X.txt
set -u
source benchmarks/gpu_setup.sh || exit 1
LIST=${1:?give a run list}
LIMIT=${LIMIT:-500}
SEEDS=${SEEDS:-0 1 2}
runs=$OUT/runs
mkdir -p "$runs"
[ "${CUDA_TESTS:-0}" = 1 ] && start_cuda_tests
while read -r name args; do
    [ -z "$name" ] || [ "${name#\#}" != "$name" ] && continue
    for seed in $SEEDS; do
        # shellcheck disable=SC2086
        timeout "$LIMIT" python3 -m laplace_equivariance train $args --device cuda \
            --threads 1 --seed "$seed" --out "$runs/$name-seed$seed" \
            > "$OUT/$name-seed$seed.log" 2>&1 &
    done
done < "$LIST"
wait
for log in "$OUT"/*-seed*.log; do
    name=$(basename "$log" .log)
    mv "$log" "$runs/$name/console.log" 2>/dev/null || mv "$log" "$runs/"
done
tar czf "$OUT/runs.tgz" -C "$OUT" --exclude=model.pt --exclude=checkpoint.pt runs
rm -rf "$runs"
[ "${CUDA_TESTS:-0}" = 1 ] && tail -n 3 "$OUT/cuda-tests.log"
tar tzf "$OUT/runs.tgz" | grep -c results.json
