#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, builds with warnings as errors,
# runs every suite (unit, backend conformance on host and each OpenCL device, ...), then builds
# again under AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite there too.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
tools/install-deps.sh
run() {
  local dir=$1 mult=$2; shift 2
  if [ ! -d "$dir" ]; then
    meson setup "$dir" -Dwerror=true "$@"
  fi
  ninja -C "$dir"
  meson test -C "$dir" --print-errorlogs --num-processes 1 --timeout-multiplier "$mult"
}
echo "== release build =="
run build-ci 1 --buildtype=debugoptimized
echo "== a program outside the tree, built with pkg-config against the installed library =="
tests/install/check.sh build-ci
echo "== the Python package: pip install . into a virtual environment, then pytest =="
tools/test_python.sh build-ci
echo "== AddressSanitizer + UndefinedBehaviorSanitizer build =="
# allocator_may_return_null: the out-of-memory tests ask for terabytes and expect a clean error,
# which ASan would otherwise turn into an abort.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run build-asan 4 -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug
