#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build clnode, and run the seed
# experiment (the built-in seed model, fp32, batch 1, 2 and 1000) on every device present.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
tools/install-deps.sh
[ -d build ] || meson setup build --buildtype=release
ninja -C build
echo
echo "== the seed problem (tsit5, rtol 1e-4, atol 1e-6, t in [0, 50], y0 = 0) on every device =="
devices=(host)
if command -v clinfo >/dev/null && [ "$(clinfo -l 2>/dev/null | grep -c Device)" -gt 0 ]; then
  n=$(clinfo -l 2>/dev/null | grep -c Device)
  for ((i = 0; i < n; i++)); do devices+=("opencl:$i"); done
fi
for dev in "${devices[@]}"; do
  for b in 1 2 1000; do
    out=$(./build/tools/clnode-solve --device "$dev" --batch "$b" --quiet --json 2>&1) || true
    python3 - "$dev" "$b" "$out" <<'PY'
import json, sys
dev, b, out = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    j = json.loads(out)
except ValueError:
    print(f"{dev:12s} batch {b:>5s}: {out.strip().splitlines()[-1] if out.strip() else 'failed'}")
    sys.exit(0)
steps = sorted({t["num_steps"] for t in j["trajectories"]})
res = sorted({t["result"] for t in j["trajectories"]})
print(f"{dev:12s} batch {b:>5s}: steps {steps} result {res} on {j['device']} ({j['wall_seconds']:.3f} s)")
PY
  done
done
