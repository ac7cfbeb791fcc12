#!/usr/bin/env bash
# The PyTorch stage of the test suite: a virtual environment under the build directory (first
# argument, default build-ci) with python/requirements-test.txt from PyPI and torch, its four
# nvidia wheels, torchdiffeq and torchode by the --no-deps route of python/requirements-torch.txt
# (doc/building.md, "PyTorch"), from a wheel folder kept between runs ($CLNODE_TORCH_WHEELS, else
# ~/.cache/clnode/torch-wheels: pip downloads only what it lacks); the package built into it;
# then mypy over the package with torch's types, and the torch tests of tests/python, none of
# which may skip: a torch that does not import fails the stage.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-ci}
py=${CLNODE_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=$(command -v python3); fi
fi
wheels=${CLNODE_TORCH_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/clnode/torch-wheels}
venv="$build/torch-venv"
mkdir -p "$build" "$wheels"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r python/requirements-test.txt
# the wheels: downloaded once into the folder, then installed from it alone
"$venv/bin/python" -m pip download -q --no-deps -d "$wheels" -r python/requirements-torch.txt
"$venv/bin/python" -m pip install -q --no-deps --no-index --find-links "$wheels" \
  -r python/requirements-torch.txt
"$venv/bin/python" -c "import torch, torchdiffeq, torchode" || {
  echo "test_torch.sh: torch does not import in $venv (doc/building.md, PyTorch)" >&2
  exit 1
}
"$venv/bin/python" -m pip install -q --no-build-isolation --force-reinstall --no-deps .
cd "$build"
"$(pwd)/torch-venv/bin/python" -m mypy --config-file "$OLDPWD/pyproject.toml" \
  --cache-dir "$(pwd)/mypy-cache-torch" -p clnode
log="$(pwd)/meson-logs/torch-pytest.txt"
mkdir -p "$(dirname "$log")"
rc=0
"$(pwd)/torch-venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
  "$OLDPWD"/tests/python/test_torch_*.py "$OLDPWD/tests/python/test_example_torch_neural_ode.py" \
  "$OLDPWD/tests/python/test_package_files.py" 2>&1 | tee "$log" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
if grep -q "SKIPPED" "$log"; then
  echo "test_torch.sh: torch tests were skipped (see above); none may be here" >&2
  exit 1
fi
