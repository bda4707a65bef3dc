#!/bin/bash
# The GPU check, for a machine with an NVIDIA GPU and no network.
#
#   bash benchmarks/gpu_check.sh [WHEELS_DIR]        (run from the repository root)
#
# Beforehand, on a machine with network, put the wheels of the package's dependencies that the GPU machine lacks into
# WHEELS_DIR (default: ./wheels), e.g.  pip download -d wheels --only-binary=:all: --python-version 3.12 \
#   --platform manylinux2014_x86_64 libcst merge3 fastcore rich matplotlib packaging nbdev execnb
# (torch with CUDA must already be installed there). The script installs only what does not import, into a private
# folder, then runs: the CUDA-marked tests and the benchmark's tests with a GPU present, the modes side by side
# (eager, device graph, compiled, compiled + device graph) for both subjects at full shapes, bf16, batch 1 and 8,
# with their targets (benchmarks/code_predictor_modes.py), and the eager-vs-graph targets script. Results: benchmarks/results/gpu-<date>.json with GPU, driver, torch, date
# and the commands; logs and the plot beside it. Every step has its own time limit.
set -u
WHEELS=${1:-wheels}
STAMP=$(date -u +%Y-%m-%dT%H%MZ)
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
LOG="$OUT/gpu-$STAMP.log"
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg OMNI_NPU_PORT_CACHE=${OMNI_NPU_PORT_CACHE:-/tmp/onp-cache}
PY=${PYTHON:-python3}
step() { echo; echo "=== $1 ($(date +%T), ${SECONDS}s)"; }

step environment
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || { echo "no nvidia-smi: not a GPU machine"; exit 3; }
$PY -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" || exit 3

step install-missing-dependencies
missing=$($PY - <<'PY'
import importlib
mods = {"libcst": "libcst", "merge3": "merge3", "fastcore": "fastcore", "rich": "rich", "matplotlib": "matplotlib",
        "packaging": "packaging", "nbdev": "nbdev", "execnb": "execnb", "pytest": "pytest"}
print(" ".join(d for m, d in mods.items() if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  echo "missing: $missing (installing every wheel of $WHEELS into /tmp/onp-site, no index, no network)"
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "no wheels in $WHEELS: prepare them first (see the top of this script)"; exit 3; }
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/onp-site "$WHEELS"/*.whl || exit 3
  export PYTHONPATH=/tmp/onp-site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
$PY -c "import omni_npu_port; print('omni_npu_port', omni_npu_port.__version__, omni_npu_port.__file__)" || exit 3

step tests-with-a-gpu-present
timeout 600 $PY -m pytest -p no:cacheprovider -q -rfEs tests/test_bench.py tests/test_ops.py tests/test_talker_mtp.py \
  tests/test_platform.py -m "not slow" -k "not torch_npu_each_release and not schema_drift and not doctor_ops" 2>&1 | tail -25

step modes-side-by-side
CMD="python benchmarks/code_predictor_modes.py --device cuda --mode all --subject both --batch-sizes 1,8 --iters 50 --warmup 5 --dtype bfloat16"
timeout 900 $PY benchmarks/code_predictor_modes.py --device cuda --mode all --subject both --batch-sizes 1,8 --iters 50 \
  --warmup 5 --dtype bfloat16 --json "$OUT/modes-$STAMP.raw.json" --plot "$OUT/modes-$STAMP.png"

step targets-script
timeout 300 $PY benchmarks/talker_mtp_graphs.py --device cuda --batch-sizes 1,2,4,8 --json "$OUT/targets-$STAMP.json"

step result-json
$PY - "$OUT" "$STAMP" "$CMD" <<'PY'
import json, subprocess, sys, datetime, torch
out, stamp, cmd = sys.argv[1:4]
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
name, driver, mem = [x.strip() for x in smi.splitlines()[0].split(",")]
try: modes = json.load(open(f"{out}/modes-{stamp}.raw.json"))
except OSError: modes = None
res = {"gpu": name, "gpu_memory": mem, "driver": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "command": cmd,
       "script": "benchmarks/gpu_check.sh", "modes": modes}
if modes:
    from omni_npu_port.bench.modes import check_mode_targets
    res["targets"] = check_mode_targets(modes)
    for t in res["targets"]:
        print(("pass" if t["ok"] else "FAIL") if t["applies"] else "n/a ", t["target"], "-", t["detail"])
json.dump(res, open(f"{out}/gpu-{stamp}.json", "w"), indent=2)
print(f"wrote {out}/gpu-{stamp}.json")
PY
echo "total ${SECONDS}s"
