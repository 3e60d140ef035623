# Sourced by benchmarks/gpu_speed.sh and the studies/gpu_*.sh scripts on the GPU machine (repository root): installs
# the wheels of ../shared/tools/gpu-wheels from .whl/ into .site/, puts them and the
# repository on PYTHONPATH, and writes the GPU's name, memory, driver, torch and CPU count
# to $OUT/device.txt.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site:$PWD || return 1
export PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to the folder that receives the results}
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
    nproc
} > "$OUT/device.txt" 2>&1

# Every CUDA case of the curvature, layer, model and lengthscale tests, in the background
# (at most TEST_LIMIT seconds, 240 by default), into $OUT/cuda-tests.xml and $OUT/cuda-tests.log; `wait` collects it.
start_cuda_tests() {
    timeout "${TEST_LIMIT:-240}" python3 -m pytest -q -n 2 -k cuda tests/curvature tests/layers \
        tests/test_models.py tests/curvature/test_lengthscales.py --junitxml="$OUT/cuda-tests.xml" \
        > "$OUT/cuda-tests.log" 2>&1 &
}
