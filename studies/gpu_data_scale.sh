#!/usr/bin/env bash
# App. F.1's learned F-FC+CONV on Fashion-MNIST's class task at two data sizes, on one GPU:
# all 60,000 training items for 12 epochs against 4,000 of them for 180 epochs, the same
# number of gradient steps (720,000 examples) and of marginal-likelihood fits (11), three
# seeds each, six runs side by side (one CPU thread each), each stopped after LIMIT seconds.
# Writes under $OUT: device.txt and runs.tgz (each run's results.json, with its per-layer
# precisions, effective parameters and path_outputs, its plots and console log).
#
# Usage (repository root of the GPU machine, with the wheels of ../shared/tools/gpu-wheels in
# .whl/ and Fashion-MNIST's four IDX files in .data/fashion-mnist/):
#     OUT=... LIMIT=530 bash studies/gpu_data_scale.sh
set -u
source benchmarks/gpu_setup.sh || exit 1
LIMIT=${LIMIT:-530}
runs=$OUT/runs
mkdir -p "$runs"
for seed in 0 1 2; do
    for size in "n60000 --epochs 12 --burnin 2 --marglik-frequency 1" \
        "n4000 --subset 4000 --epochs 180 --burnin 30 --marglik-frequency 15"; do
        read -r name options <<< "$size"
        # shellcheck disable=SC2086  # the options are words
        timeout "$LIMIT" python3 -m laplace_equivariance train --dataset quadrant-fashion-item \
            --model f-fc+conv --method marglik --alpha 4 $options --threads 1 --device cuda \
            --data-dir .data/fashion-mnist --seed "$seed" --out "$runs/$name-seed$seed" \
            > "$OUT/$name-seed$seed.log" 2>&1 &
    done
done
wait
for log in "$OUT"/n*-seed*.log; do
    name=$(basename "$log" .log)
    mv "$log" "$runs/$name/console.log" 2>/dev/null || mv "$log" "$runs/"
done
tar czf "$OUT/runs.tgz" -C "$OUT" --exclude=model.pt --exclude=checkpoint.pt runs
rm -rf "$runs"
tar tzf "$OUT/runs.tgz" | grep -c results.json
