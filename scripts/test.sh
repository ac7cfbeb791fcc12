#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, builds with warnings as errors,
# runs every suite (unit, backend conformance on host and each OpenCL device, the device code on
# Oclgrind, ...), then builds again under AddressSanitizer + UndefinedBehaviorSanitizer and runs
# the suite there too, and under ThreadSanitizer runs the multi-threaded test and a few others.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/install-deps.sh
# The devices this run must have (scripts/install-deps.sh installs them): a test of one of them that
# finds it absent fails, naming it, instead of skipping (tests/common/test_device.h). Set the
# variable (empty: none) to require other devices.
export CLNODE_REQUIRE_DEVICES="${CLNODE_REQUIRE_DEVICES-host,opencl:pocl,opencl:oclgrind}"
# stage TITLE: the stage's banner, with the seconds the run has taken so far (CI's budget: 45 min)
stage() { echo "== $1 (at ${SECONDS} s) =="; }
# run DIR TIMEOUT_MULTIPLIER [meson setup options...]; $TEST_ARGS adds meson test options.
run() {
  local dir=$1 mult=$2; shift 2
  if [ ! -d "$dir" ]; then
    meson setup "$dir" -Dwerror=true "$@"
  fi
  ninja -C "$dir"
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs --num-processes 1 --timeout-multiplier "$mult" ${TEST_ARGS:-}
}
stage "release build"
TEST_ARGS="--no-suite oclgrind" run build-ci 1 --buildtype=debugoptimized
# The Oclgrind suite (the device code on a simulated device: minutes, one thread) runs beside the
# next three stages, which leave a core idle much of the time; its log is shown, and its result
# counted, after them (and it is stopped if one of them fails).
oclgrind_log=build-ci/meson-logs/oclgrind-suite.txt
meson test -C build-ci --no-rebuild --print-errorlogs --num-processes 1 --suite oclgrind \
  --logbase oclgrind-testlog >"$oclgrind_log" 2>&1 &
oclgrind_pid=$!
trap 'kill "$oclgrind_pid" 2>/dev/null || true' EXIT
stage "a program outside the tree, built with pkg-config against the installed library"
tests/install/check.sh build-ci
stage "the Python package: pip install . into a virtual environment, then pytest"
scripts/test_python.sh build-ci
stage "the Python package as users install it, beside Debian's numpy: pip install ., python -m build"
scripts/test_install.sh
stage "the Oclgrind suite of the release build (run beside the three stages above)"
oclgrind_rc=0
wait "$oclgrind_pid" || oclgrind_rc=$?
trap - EXIT
cat "$oclgrind_log"
[ "$oclgrind_rc" -eq 0 ] || { echo "test.sh: the Oclgrind suite failed ($oclgrind_rc)" >&2; exit 1; }
# The PyTorch stage (scripts/test_torch.sh: torch by the --no-deps route of doc/building.md from
# its kept wheel folder, then the torch tests, none skipped) runs beside the sanitizer build,
# whose tests take one core; its log is shown, and its result counted, after that stage (and it
# is stopped if that stage fails).
torch_log=build-ci/meson-logs/torch-stage.txt
scripts/test_torch.sh build-ci >"$torch_log" 2>&1 &
torch_pid=$!
trap 'kill "$torch_pid" 2>/dev/null || true' EXIT
stage "AddressSanitizer + UndefinedBehaviorSanitizer build"
# allocator_may_return_null: the out-of-memory tests ask for terabytes and expect a clean error,
# which ASan would otherwise turn into an abort. The 'slow' suite ran in the release build: the
# Oclgrind suite (its simulated kernels are the same under ASan, and there they take twenty
# minutes) and PoCL's whole conformance matrix (16 minutes under ASan on a loaded 2-core
# machine, against 5 in the release build). Under ASan the OpenCL backend's host code still runs
# in every other opencl test: diffrax parity of the forms and the ensembles, saved rows and steps,
# compaction, the output scale, probes, sensitivity, adoption, faults and cancellation.
# intercept_tls_get_addr=0: GCC 12's LeakSanitizer, tracking the dynamic TLS blocks of the OpenCL
# runtime's (PoCL's LLVM) threads through __tls_get_addr, sometimes scans a block recorded from
# address 0 and its tracer faults at exit ("Tracer caught signal 11" in ScanRangeForPointers,
# "LeakSanitizer has encountered a fatal error") after every test passed: about one run in ten
# of test_threads and test_sensitivity on PoCL. Without the interception those blocks are
# ordinary heap blocks reached from each thread's DTV, so they are still scanned (0 failures in
# 60 runs of test_threads host opencl:pocl, from 5 in 48).
TEST_ARGS="--no-suite slow" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run build-asan 4 -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug
stage "the PyTorch stage (run beside the sanitizer build above)"
torch_rc=0
wait "$torch_pid" || torch_rc=$?
trap - EXIT
cat "$torch_log"
[ "$torch_rc" -eq 0 ] || { echo "test.sh: the PyTorch stage failed ($torch_rc)" >&2; exit 1; }
stage "ThreadSanitizer build: separate contexts in separate threads"
# Only the thread tests (separate contexts; the host backend's own thread pool; the reverse and
# tangent passes at 1, 2 and 4 threads) and a few unit tests: the build takes the time, not the
# tests. No suppressions are needed (CLBlast's process-wide caches are used under clnode's lock,
# lib/backends/opencl).
if [ ! -d build-tsan ]; then
  meson setup build-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false --buildtype=debug
fi
tsan_tests=(threads host-threads grad-analytic tangent method controller safetensors host-gemm)
ninja -C build-tsan tests/backend/test_threads tests/backend/test_host_threads \
  tests/backend/test_grad_analytic tests/backend/test_tangent tests/unit/test_method \
  tests/unit/test_controller tests/unit/test_safetensors tests/unit/test_host_gemm
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 1 \
  --timeout-multiplier 4 "${tsan_tests[@]}"
stage "done"
