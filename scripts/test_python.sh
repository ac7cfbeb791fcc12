#!/usr/bin/env bash
# The Python stage of the test suite: a virtual environment under the build directory (first
# argument, default build-ci) with python/requirements-test.txt from PyPI, the package built into
# it from this tree by meson-python (`pip install .`), then mypy over the installed package and
# pytest on tests/python.
# The interpreter is $CLNODE_PYTHON, else Debian's /usr/bin/python3 (python3-venv and python3-dev
# come from scripts/install-deps.sh), else python3 on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-ci}
py=${CLNODE_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=$(command -v python3); fi
fi
venv="$build/python-venv"
mkdir -p "$build"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r python/requirements-test.txt
# no build isolation: the pinned meson-python, meson and numpy above build it
"$venv/bin/python" -m pip install -q --no-build-isolation --force-reinstall --no-deps .
# run from outside the tree so that `import clnode` is the installed package
cd "$build"
# the installed package's types (its py.typed, the extension's stub), with pyproject's [tool.mypy]
"$(pwd)/python-venv/bin/python" -m mypy --config-file "$OLDPWD/pyproject.toml" \
  --cache-dir "$(pwd)/mypy-cache" -p clnode
# Two worker processes (pytest-xdist), each taking whole modules (--dist loadfile: a module's
# fixtures, such as the example's runs, are made once): most of the time is single-threaded
# Python (diffrax tracing its solves), so two workers on a 2-core machine take about half the
# time of one. CLNODE_PYTEST_WORKERS overrides the count (0: no workers, in this process).
"$(pwd)/python-venv/bin/python" -m pytest -q -p no:cacheprovider \
  -n "${CLNODE_PYTEST_WORKERS:-2}" --dist loadfile "$OLDPWD/tests/python"
