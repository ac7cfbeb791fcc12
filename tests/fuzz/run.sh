#!/bin/sh
# run.sh - runs the CLI fuzzer for a bounded time, in one process: FUZZER WORK_DIR SEED_CORPUS
# SECONDS ($FUZZ_SECONDS overrides SECONDS). New inputs go to WORK_DIR/corpus (never into the
# committed seed corpus), findings (crash-*, leak-*, timeout-*) to WORK_DIR/.
set -eu
fuzzer=$(realpath "$1")
work=$(realpath -m "$2")
seeds=$(realpath "$3")
seconds=${FUZZ_SECONDS:-$4}
mkdir -p "$work/corpus"
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -close_fd_mask=3 -print_final_stats=1 \
    -artifact_prefix="$work/" corpus "$seeds"
