#!/usr/bin/env bash
# clnode.jax's custom-call tests with the oldest supported jax/jaxlib (clnode.jax._ffi.MIN_JAXLIB,
# 0.5.0), by hand: CI tests the newest (python/requirements-test.txt) only, for CI time.
#
#   scripts/test_jax_oldest.sh [BUILD]     (BUILD default build; needs BUILD/python-venv)
#
# It takes the clnode package that scripts/test_python.sh (or the steps in doc/building.md)
# installed into BUILD/python-venv, so nothing is built here: a throw-away virtual environment
# BUILD/jax-oldest-venv gets jax and jaxlib 0.5.0 and the rest of python/requirements-test.txt's
# pins that the tests import (pip's cache serves them after the first run; equinox and diffrax
# with --no-deps, as their newest releases ask for a newer jax than they need), and pytest runs,
# from outside the tree, the tests of the custom calls: the ABI against this jaxlib's c_api.h,
# the synthetic call frames, the calls under jax.jit, traced controller numbers and Ctrl-C.
# JAX_OLDEST_TESTS overrides the list (names under tests/python); JAX_OLDEST_KEEP=1 reuses the
# environment of the last run instead of making it again.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build}
src="$build/python-venv"
if [ ! -x "$src/bin/python" ]; then
  echo "test_jax_oldest: $src not found: run scripts/test_python.sh $build first" >&2
  exit 2
fi
site=$("$src/bin/python" -c 'import clnode, os; print(os.path.dirname(os.path.dirname(clnode.__file__)))')
venv="$(cd "$build" && pwd)/jax-oldest-venv"
if [ "${JAX_OLDEST_KEEP:-0}" != 1 ] || [ ! -x "$venv/bin/python" ]; then
  "$src/bin/python" -m venv --clear "$venv"
fi
pin() { grep -E "^$1==" python/requirements-test.txt; }
"$venv/bin/python" -m pip install -q "jax==0.5.0" "jaxlib==0.5.0" "$(pin numpy)" "$(pin pytest)" \
  "$(pin pytest-xdist)" "$(pin execnet)" jaxtyping typing_extensions wadler_lindig
"$venv/bin/python" -m pip install -q --no-deps "$(pin equinox)" "$(pin diffrax)" lineax==0.0.8 \
  optimistix==0.1.0
# the built package, and nothing else of that environment, on the path
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
ln -s "$site/clnode" "$pkg/clnode"
tests=${JAX_OLDEST_TESTS:-test_jax_ffi_abi.py test_jax_ffi_frames.py test_jax_ffi.py test_jax_ffi_ctrl.py test_jax_ffi_sigint.py}
cd "$build"
got=$(PYTHONPATH="$pkg" "$venv/bin/python" -c 'import jax, jaxlib, clnode.jax; print(jax.__version__, jaxlib.__version__)')
echo "test_jax_oldest: jax and jaxlib $got, clnode from $site"
args=()
for t in $tests; do args+=("$root/tests/python/$t"); done
PYTHONPATH="$pkg" "$venv/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}"
