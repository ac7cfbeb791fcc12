#!/usr/bin/env bash
# The Python package installed as users install it, on a machine where Debian's python3-numpy
# (numpy 1.x, whose headers /usr/include/python3.X/numpy lies beside Python's) is present:
#   1. `pip install .` with build isolation into a fresh venv of /usr/bin/python3 (numpy 2 from
#      PyPI at build and at run time);
#   2. `python -m build` (an sdist, then a wheel built from it), the wheel installed into a
#      --system-site-packages venv, which runs it with Debian's numpy 1.x.
# Each imports clnode and solves the seed problem (12 fp32 steps; both give the same bytes), and
# runs the wheel's clnode-solve from the venv's bin/ (no libclnode, no RUNPATH into the build).
# Usage: scripts/test_install.sh [WORKDIR] (default: a temporary directory, removed at the end).
# Needs /usr/bin/python3 with python3-venv and python3-numpy (scripts/install-deps.sh) and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
py=/usr/bin/python3
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

[ -x "$py" ] || fail "$py is missing"
debian_np=$("$py" -c 'import numpy; print(numpy.__version__)' 2>/dev/null) ||
  fail "Debian's python3-numpy is not importable by $py: this check needs it present"
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -e "$inc/numpy/arrayobject.h" ] ||
  fail "$inc/numpy/arrayobject.h is missing: this check needs Debian's numpy headers there"
echo "test_install: $py, Debian's numpy $debian_np, its headers at $inc/numpy"

if [ $# -ge 1 ]; then
  work=$1
  rm -rf "$work"
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/clnode-install.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
# The tracked files as they are in the working tree, committed into a repository of their own:
# pip and build see what a clone would have (no build outputs), and `meson dist`, which makes
# the sdist, needs a git repository.
mkdir -p "$work/src"
git -C "$src" ls-files -z | (cd "$src" && tar --null -T - -cf -) | tar -C "$work/src" -xf -
git -C "$work/src" init -q
git -C "$work/src" add -A
git -C "$work/src" -c user.name=clnode -c user.email=clnode@localhost commit -q -m snapshot

# The seed problem: 12 accepted fp32 steps on the host; its bytes go to FILE for comparison.
seed_check() {  # seed_check PYTHON NUMPY_MAJOR OUTFILE
  (cd "$work" && "$1" - "$2" "$3" <<'EOF'
import sys
import numpy as np
import clnode
major, out = int(sys.argv[1]), sys.argv[2]
if int(np.__version__.split(".")[0]) != major:
    sys.exit("expected numpy %d.x at run time, found %s" % (major, np.__version__))
sol = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=1e-4, atol=1e-6,
                   saveat=clnode.SaveAt(steps=True), precision="fp32")
n = int(sol.stats["num_accepted_steps"])
if n != 12 or sol.result != clnode.Result.success:
    sys.exit("seed problem: %d steps, result %s (expected 12, success)" % (n, sol.result))
open(out, "wb").write(np.ascontiguousarray(sol.ys).tobytes())
print("  numpy %s: clnode %s, seed problem %d steps, %s" % (np.__version__, clnode.__version__, n,
                                                          sol.result))
EOF
  )
}

# The command-line tools of the wheel: in the venv's bin/, linked with no libclnode and no RUNPATH
# into a build tree, solving the seed problem (12 steps) run from / with no library path.
tools_check() {  # tools_check VENV
  local t dyn out
  for t in clnode-solve clnode-devices clnode-compare clnode-bench; do
    [ -x "$1/bin/$t" ] || fail "$t is not installed in $1/bin"
  done
  dyn=$(readelf -d "$1/bin/clnode-solve") || fail "readelf -d $1/bin/clnode-solve failed"
  if grep -E 'libclnode|R(UN)?PATH.*(ORIGIN|/tmp|/build)' <<<"$dyn"; then
    fail "$1/bin/clnode-solve needs libclnode or a library path of the build (above)"
  fi
  out=$(cd / && env -u LD_LIBRARY_PATH "$1/bin/clnode-solve" --json) ||
    fail "$1/bin/clnode-solve failed"
  grep -q '"num_accepted": 12,' <<<"$out" || fail "$1/bin/clnode-solve: not 12 steps: $out"
  echo "  $1/bin: the four tools; clnode-solve solves the seed problem in 12 steps"
}

echo "== pip install . (build isolation) into a fresh venv of $py =="
"$py" -m venv "$work/venv-pip"
"$work/venv-pip/bin/python" -m pip install -q --upgrade pip
"$work/venv-pip/bin/python" -m pip install -q "$work/src" || fail "pip install . failed"
seed_check "$work/venv-pip/bin/python" 2 "$work/ys-pip" || fail "pip install .: the seed check failed"
tools_check "$work/venv-pip"

echo "== python -m build, the wheel installed into a --system-site-packages venv (Debian's numpy) =="
"$work/venv-pip/bin/python" -m pip install -q build
(cd "$work/src" && "$work/venv-pip/bin/python" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1) ||
  { tail -40 "$work/build.log" >&2; fail "python -m build failed"; }
wheel=$(ls "$work"/dist/clnode-*.whl)
"$py" -m venv --system-site-packages "$work/venv-system"
# the wheel's dependency (numpy >= 1.23) is met by Debian's numpy: pip installs no other
"$work/venv-system/bin/python" -m pip install -q "$wheel" || fail "installing $wheel failed"
major=${debian_np%%.*}
seed_check "$work/venv-system/bin/python" "$major" "$work/ys-system" ||
  fail "the wheel under Debian's numpy $debian_np: the seed check failed"
tools_check "$work/venv-system"
cmp -s "$work/ys-pip" "$work/ys-system" ||
  fail "the seed solve's bytes differ between numpy 2 and Debian's numpy $debian_np"
echo "test_install: ok (both installs solve the seed problem in 12 steps, the same bytes; their tools too)"
