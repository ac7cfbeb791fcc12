#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build clnode, and run the seed
# experiment on every device present: what each device's GEMMs really compute (clnode-devices),
# then the seed problem (the built-in seed model, tsit5, rtol 1e-4, atol 1e-6, t in [0, 50],
# y0 = 0) at batch 1, 2 and 1000 on every device x GEMM mode x precision, against the host
# float64 reference (clnode-compare).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/install-deps.sh
[ -d build ] || meson setup build --buildtype=release
ninja -C build
echo
./build/tools/clnode-devices
echo
./build/tools/clnode-compare --batches 1,2,1000 "$@"
