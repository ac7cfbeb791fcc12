"""The Python side of the library's option table (clnode.OPTIONS, _clnode.solve_options()): the
stub's SolveOptions lists every keyword clnode.solve takes from it, with the Python type of its
kind; clnode.solve takes each as a keyword (its value reaching the library: a refused value is
the library's refusal), documents it, and refuses names outside the table; clnode.jax takes each
option from exactly one place (diffrax's arguments, PIDController, SaveAt, or its own keyword)
and every PIDController field is either mapped or refused by name. Oracles: the table as the
library reports it, diffrax.PIDController's fields."""
import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import clnode
from clnode import _clnode
from clnode import _solve as _solve_module

_PROBLEM, _SAVE, _CONTROLLER = 16, 32, 4
_TYPES = {"real": "float", "integer": "int", "boolean": "bool", "choice": "str", "method": "str"}


def _keywords():
    return [o for o in _clnode.solve_options() if not o["flags"] & (_PROBLEM | _SAVE)]


def _stub_solve_options():
    path = pathlib.Path(_clnode.__file__).with_name("_clnode.pyi")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SolveOptions")
    return {n.target.id: ast.unparse(n.annotation) for n in cls.body
            if isinstance(n, ast.AnnAssign)}


def test_the_table_is_the_library_s():
    table = _clnode.solve_options()
    names = [o["name"] for o in table]
    assert len(names) == len(set(names)) >= 20
    assert {"rtol", "atol", "max_steps", "method", "precision", "save_t1"} <= set(names)
    assert list(_solve_module.OPTIONS) == names
    rtol = _solve_module.OPTIONS["rtol"]
    assert (rtol["type"], rtol["default"], rtol["min"]) == ("real", 1e-3, 0.0)
    assert dict(_solve_module.OPTIONS["precision"]["choices"]) == {"fp32": 32, "fp64": 64}
    assert _solve_module.OPTIONS["method"]["choices"] == _clnode.method_names()


def test_stub_lists_every_keyword_with_its_type():
    stub = _stub_solve_options()
    want = {o["name"]: o["type"] for o in _keywords()}
    assert set(stub) == set(want), (f"in the table, not the stub: {set(want) - set(stub)}; "
                                    f"in the stub, not the table: {set(stub) - set(want)}")
    for name, kind in want.items():
        if name == "precision":
            assert stub[name] == "Any"  # dtypes too
            continue
        assert stub[name] == f"Optional[{_TYPES[kind]}]", (name, stub[name], kind)


def _solve(**kw):
    dt0 = None if kw.get("dt0_auto") else 0.1  # dt0_auto chooses it: a dt0 is refused
    return clnode.solve(clnode.seed_model(), np.zeros(10), t0=0.0, t1=1.0, dt0=dt0, **kw)


@pytest.mark.parametrize("o", _keywords(), ids=lambda o: o["name"])
def test_solve_takes_each_option_and_documents_it(o):
    assert f"    {o['name']}: {o['doc']}" in clnode.solve.__doc__
    kind = o["type"]
    if kind == "real":
        value, bad = o["default"] * 0.5 if o["default"] else 0.5, o["min"] - 1.0
    elif kind == "integer":
        value, bad = max(int(o["default"]) // 2, int(o["min"])), int(o["min"]) - 1
    elif kind == "boolean":
        value, bad = not o["default"], None
    elif kind == "method":
        value, bad = "dopri5", "rk4"
    else:
        value, bad = o["choices"][-1][0], "no-such-choice"
    if o["name"] == "factormax":
        value = 2.0
    quiet = {"precision_guard": "off"} if o["name"] == "gemm_precision" else {}  # tf32, rtol 1e-3
    if o["name"] == "checkpoint_every":  # it spaces the kept tape's states: refused without one
        quiet = {"keep_tape": True}
    _solve(**{o["name"]: value}, **quiet)
    if bad is not None and not (kind == "real" and o["min"] <= -1e308):
        with pytest.raises(ValueError, match=o["name"]):
            _solve(**{o["name"]: bad}, **quiet)


def test_solve_refuses_names_outside_the_table():
    with pytest.raises(TypeError, match="rtoll"):
        _solve(rtoll=1e-3)
    with pytest.raises(TypeError, match="saveat"):
        _solve(save_t0=True)
    with pytest.raises(TypeError, match="gemm_mode"):
        _solve(gemm_mode="tf32")


def test_an_option_reaches_the_library():
    # rtol reaches the library: fewer steps at a looser tolerance, the library's range refusal
    tight = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=1e-6)
    loose = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=1e-2)
    assert tight.stats["num_steps"] > loose.stats["num_steps"]
    with pytest.raises(clnode.InvalidArgumentError, match=r"factormin .*\(0, 1\]"):
        _solve(factormin=1.5)


def test_jax_takes_each_option_from_one_place():
    jx = pytest.importorskip("clnode.jax")
    import diffrax
    from clnode.jax import _problem  # diffrax's arguments mapped onto the library's options
    names = [o["name"] for o in _clnode.solve_options()]
    assert set(_problem._ROUTES) == set(names)
    pid = {f.name for f in dataclasses.fields(diffrax.PIDController)}
    for o in _clnode.solve_options():
        route = _problem._ROUTES[o["name"]]
        if o["flags"] & _CONTROLLER and o["name"] in pid:
            assert route.startswith("stepsize_controller"), o["name"]
        if route == "keyword":
            assert f"    {o['name']}: {o['doc']}" in jx.diffeqsolve.__doc__
    # every PIDController field is an option of the table or refused by name
    refused = {"step_ts", "jump_ts", "error_order", "norm"}
    assert pid - refused <= set(names), pid - refused - set(names)
    assert {"gemm_precision", "precision_guard"} <= set(_problem.KEYWORDS)
