"""The package's types and the names it takes from the library: the stub of the extension names
exactly what the compiled module exports, mypy checks code against it (and rejects wrong code),
the result, method and activation names are the library's, and the version is meson.build's."""
import ast
import importlib.metadata
import re
import subprocess
import sys

import numpy as np
import pytest

import clnode
from clnode import _clnode, _model, _solve


def _stub():
    """The installed stub of clnode._clnode, parsed."""
    path = __import__("pathlib").Path(_clnode.__file__).with_name("_clnode.pyi")
    assert path.is_file(), f"the stub is not installed beside the extension: {path}"
    return ast.parse(path.read_text())


def _stub_names(body):
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def _public(names):
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


# names of the stub for type checkers only, not of the module
_TYPING_ONLY = {"SolveOptions"}


def test_stub_names_every_export_of_the_extension():
    stub = {k: v for k, v in _stub_names(_stub().body).items() if k not in _TYPING_ONLY}
    module = _public(dir(_clnode))
    assert set(stub) == module, (f"in the module, not the stub: {sorted(module - set(stub))}; "
                                 f"in the stub, not the module: {sorted(set(stub) - module)}")
    for name, node in stub.items():
        obj = getattr(_clnode, name)
        if isinstance(node, ast.ClassDef) and not issubclass(obj, BaseException):
            members = _public(_stub_names(node.body))
            assert members == _public(vars(obj)), name
        if isinstance(node, ast.ClassDef):
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            assert bases == [c.__name__ for c in obj.__bases__ if c is not object], name
        if isinstance(node, ast.FunctionDef):
            assert callable(obj), name


def test_result_method_and_activation_names_are_the_library_s():
    names = _clnode.result_names()
    assert [(r.name, int(r)) for r in clnode.Result] == [(n, c) for c, n in enumerate(names)]
    assert names[0] == "success" and "max_steps_reached" in names  # the library's own spelling
    assert _solve.METHODS == _clnode.method_names() and "tsit5" in _solve.METHODS
    assert _model.ACTIVATIONS == _clnode.activation_names() and "softplus" in _model.ACTIVATIONS
    # every name is one the library takes back
    w = np.eye(10)
    for act in _model.ACTIVATIONS:
        assert clnode.MLP([w], activation=act, final_activation=act).activation == act
    for method in _solve.METHODS:
        sol = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, dt0=0.1,
                           method=method, constant_step=True)
        assert sol.result is clnode.Result.success
    # Python's tables keyed by the library's names cover them all
    assert set(_model._TORCH_ACTS.values()) == set(_model.ACTIVATIONS)


def test_results_are_result_members_shown_by_name():
    m = clnode.seed_model()
    one = clnode.solve(m, np.zeros(10), t0=0, t1=50, dt0=0.02, max_steps=3)
    assert type(one.result) is clnode.Result and one.result == 1
    assert one.result is clnode.Result.max_steps_reached and str(one.result) == "max_steps_reached"
    assert "result=max_steps_reached" in repr(one) and not one.ok
    batch = clnode.solve(m, np.zeros((2, 10)), t0=0, t1=50, dt0=0.02, rtol=1e-4, atol=1e-6)
    assert batch.result.dtype == object and list(batch.result) == [clnode.Result.success] * 2
    assert "result=[success success]" in repr(batch) and batch.ok


def test_jax_maps_every_library_result():
    pytest.importorskip("clnode.jax")
    from clnode.jax import _callback, _problem
    assert set(_callback._DIFFRAX_OF) == set(_clnode.result_names())
    assert list(_callback._DIFFRAX_CODE) == [_callback._DIFFRAX_OF[r.name]
                                             for r in clnode.Result]
    assert set(_problem._SOLVERS.values()) == set(_solve.METHODS)


def test_version_is_meson_s(repo):
    meson = (repo / "meson.build").read_text()
    want = re.search(r"project\('clnode'[^)]*?version: '([^']+)'", meson, re.S).group(1)
    assert clnode.__version__ == clnode.library_version() == want
    assert importlib.metadata.version("clnode") == want


def test_context_solve_and_solve_take_one_path(monkeypatch):
    calls = []
    run = _solve._run

    def spy(context, device, model, y, opts, extra):
        calls.append((context, device, dict(opts)))
        return run(context, device, model, y, opts, extra)

    monkeypatch.setattr(_solve, "_run", spy)
    m, kw = clnode.seed_model(), dict(t0=0, t1=50, dt0=0.02, rtol=1e-4, atol=1e-6)
    ctx = clnode.Context("host")
    a = ctx.solve(m, np.zeros(10), **kw)
    b = clnode.solve(m, np.zeros(10), device="host", **kw)
    assert [c[:2] for c in calls] == [(ctx, None), (None, "host")]
    assert calls[0][2].keys() == calls[1][2].keys()
    assert a.ys.tobytes() == b.ys.tobytes() and a.stats == b.stats


SNIPPET_GOOD = """
import numpy as np
import clnode
from clnode import _clnode
sol: clnode.Solution = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0.0, t1=1.0)
version: str = clnode.library_version()
names: tuple[str, ...] = _clnode.result_names()
r: clnode.Result = clnode.Result(0)
"""
SNIPPET_BAD = """
import clnode
from clnode import _clnode
version: int = clnode.library_version()
_clnode.method_names() + 1
clnode.solve(clnode.seed_model())
"""


def test_mypy_checks_against_the_stub(tmp_path):
    """mypy (as scripts/test_python.sh runs it) passes correct use and rejects wrong use, so its
    run over the package is not vacuous."""
    pytest.importorskip("mypy")
    (tmp_path / "good.py").write_text(SNIPPET_GOOD)
    (tmp_path / "bad.py").write_text(SNIPPET_BAD)
    cmd = [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "c")]
    good = subprocess.run(cmd + ["good.py"], cwd=tmp_path, capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run(cmd + ["bad.py"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    for line in (4, 5, 6):  # each wrong line, found through the stub and the annotations
        assert f"bad.py:{line}: error" in bad.stdout, bad.stdout


def test_result_compared_with_a_string_is_refused():
    # code that compared results with "success" would otherwise be silently False
    sol = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, dt0=0.1)
    assert sol.result == clnode.Result.success and sol.result == 0 and str(sol.result) == "success"
    assert sol.result != clnode.Result(1) and {sol.result: 1}[0] == 1
    with pytest.raises(TypeError, match=r"clnode.Result.success"):
        sol.result == "success"
    with pytest.raises(TypeError, match=r"clnode.Result.success"):
        sol.result != "success"
