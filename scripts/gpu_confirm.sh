#!/usr/bin/env bash
# The GPU confirmation set: each scenario runs in the simulation and on the zmq backend with
# --device cuda (rank r on cuda:(r mod device count), so one H100/H200 hosts a 3-rank layout),
# and the side-by-side result is written as JSON. Budget: 8 minutes on one GPU.
#
# Usage: scripts/gpu_confirm.sh [OUT_DIR]   (default: reports/gpu-confirm)
# Needs: pip install -e '.[real]' with a CUDA build of torch==2.13.0 on the GPU machine.
# Exit code: 0 every confirmation agreed, 1 one disagreed or failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-reports/gpu-confirm}"
mkdir -p "$OUT"
SCALE="${SIMHARNESS_GPU_TIME_SCALE:-0.2}"
python - <<'PY' > "$OUT/device.json"
import json, torch
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                  "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}))
PY
cat "$OUT/device.json"
status=0
run() {  # name scenario runtime [timeout seconds]
  local name=$1 scenario=$2 runtime=$3 limit=${4:-150}
  local t0=$SECONDS
  timeout "$limit" simharness confirm "$scenario" --runtime "$runtime" --device cuda \
      --time-scale "$SCALE" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || status=1
}
run bagel_cfg-mstar-python scenarios/bagel_cfg.yaml mstar-python
run bagel_cfg-mstar-rust-prefix scenarios/bagel_cfg.yaml mstar-rust-prefix
run bagel_cfg_counter-mstar-rust-prefix scenarios/bagel_cfg_counter.yaml mstar-rust-prefix
# A streaming scenario joins the set once one ships (scenarios/*stream*.yaml).
for s in scenarios/*stream*.yaml; do
  [ -e "$s" ] || continue
  run "$(basename "$s" .yaml)-mstar-python" "$s" mstar-python
done
python - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("*.json")):
    if f.name in ("device.json", "summary.json"):
        continue
    try:
        d = json.loads(f.read_text())
    except ValueError:
        rows[f.stem] = {"error": (out / f"{f.stem}.err").read_text()[-500:]}
        continue
    rows[f.stem] = {"agree": d["agree"], "sim_outcome": d["sim"]["outcome"],
                    "real_outcome": d["real"]["outcome"], "real_wall_s": d["real"]["wall_s"],
                    "real_run_s": d["real"]["sim_time_s"],
                    "devices": {k: v.get("device") for k, v in d["real"]["processes"].items()},
                    "differences": [x for x in d["differences"] if not x.get("note")]}
(out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
print(json.dumps(rows, indent=2))
PY
exit $status
