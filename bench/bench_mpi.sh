#!/usr/bin/env bash
# Parallel efficiency of the MPI driver on a skewed ensemble (bench/bench_mpi.c: 10% of the
# trajectories take about 11x the steps, all at the start of the batch): R = 1 with one thread
# against R = 2 with one thread per rank, chunks handed out as ranks finish (dynamic) and a
# fixed split (static). Efficiency = T(R=1) / (2 T(R=2)), from wall times, and from the largest
# CPU time of a rank (what the wall time would be on dedicated cores, when the machine's cores
# are shared with other work). With the bench_mpi option --grad: the gradient (clnode_gradient_mpi)
# instead of the solve.
#   bench/bench_mpi.sh [BUILD_DIR [REPEATS [bench_mpi options...]]]
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
bench="$build/bench/bench_mpi"
[ -x "$bench" ] || { echo "bench_mpi.sh: $bench not built (MPI off?)" >&2; exit 77; }
export CLNODE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one run: its line on stderr, its wall time on stdout
run() {
  local line
  line=$(mpirun --oversubscribe --bind-to none -np "$1" "$bench" "${@:2}")
  echo "$line" >&2
  echo "$line" | sed -n 's/.* wall \([0-9.]*\) .* cpu_max \([0-9.]*\).*/\1 \2/p'
}
for i in $(seq "$repeats"); do
  read -r w1 c1 < <(run 1 "$@")
  read -r w2 c2 < <(run 2 "$@")
  read -r w2s c2s < <(run 2 --static "$@")
  python3 -c "import sys; w1, c1, w2, c2, w2s, c2s = map(float, sys.argv[1:])
print(f'run $i: wall R=1 {w1:.3f} s, R=2 dynamic {w2:.3f} s ({w1 / (2 * w2):.0%}), R=2 static'
      f' {w2s:.3f} s ({w1 / (2 * w2s):.0%}); CPU R=1 {c1:.3f} s, R=2 dynamic max {c2:.3f} s'
      f' ({c1 / (2 * c2):.0%}), R=2 static max {c2s:.3f} s ({c1 / (2 * c2s):.0%})')" \
    "$w1" "$c1" "$w2" "$c2" "$w2s" "$c2s"
done
