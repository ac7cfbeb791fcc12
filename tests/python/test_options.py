"""The Python side of the library's option table (clnode.OPTIONS, _clnode.solve_options()): the
stub's SolveOptions lists every keyword clnode.solve takes from it, with the Python type of its
kind; clnode.solve takes each as a keyword (its value reaching the library: a refused value is
the library's refusal), documents it, and refuses names outside the table; clnode.jax takes each
option from exactly one place (diffrax's arguments, PIDController, SaveAt, or its own keyword)
and every PIDController field is either mapped or refused by name. The table's row flags are
the library's: the extension exports each flag of clnode/solver.h with the header's value, and no
module of the package writes a flag's number of its own. Oracles: the table as the library
reports it, clnode/solver.h's text, diffrax.PIDController's fields."""
import ast
import dataclasses
import pathlib
import re

import numpy as np
import pytest

import clnode
from clnode import _clnode, _settings
from clnode import _solve as _solve_module

_PROBLEM, _SAVE, _CONTROLLER = (_clnode.OPTION_PROBLEM, _clnode.OPTION_SAVE,
                                _clnode.OPTION_CONTROLLER)
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


def _header_flags(repo):
    """The option flags clnode/solver.h defines, {"OPTION_SAVE": 32, ...}."""
    text = (repo / "include" / "clnode" / "solver.h").read_text(encoding="utf-8")
    flags = {f"OPTION_{name}": int(value)
             for name, value in re.findall(r"^#define CLNODE_OPTION_(\w+) (\d+)u\b", text, re.M)}
    assert len(flags) >= 7, f"clnode/solver.h's option flags not found: {flags}"
    return flags


def test_the_extension_exports_the_header_s_option_flags(repo):
    header = _header_flags(repo)
    exported = {n: getattr(_clnode, n) for n in dir(_clnode) if n.startswith("OPTION_")}
    assert exported == header
    # the rows of the table as clnode/solver.h writes them carry those bits
    flags = {o["name"]: o["flags"] for o in _clnode.solve_options()}
    f = _clnode
    assert flags["rtol"] == f.OPTION_MIN_OPEN | f.OPTION_CONTROLLER | f.OPTION_KERNEL
    assert flags["dtmin"] == f.OPTION_CONTROLLER | f.OPTION_KERNEL
    assert flags["pcoeff"] == f.OPTION_CONTROLLER
    assert flags["t0"] == f.OPTION_PROBLEM
    assert flags["save_t1"] == f.OPTION_SAVE
    assert flags["compact"] == f.OPTION_SAME_BITS
    assert flags["method"] == flags["max_steps"] == 0


def test_the_package_s_flag_tests_follow_the_library_s_flags():
    # each flag the package tests does what the table's row says: an open lower end (rtol, not
    # dtmin), an option of the problem or of SaveAt, one that changes no result
    with pytest.raises(ValueError, match=r"rtol must lie in \(0, "):
        _settings.metadata({"rtol": 0.0})
    assert _settings.metadata({"dtmin": 0.0, "safety": 1.0}) == {"clnode.dtmin": "0.0",
                                                                  "clnode.safety": "1.0"}
    with pytest.raises(ValueError, match=r"safety must lie in \(0, 1\]"):
        _settings.metadata({"safety": 1.5})
    with pytest.raises(TypeError, match="save_t1"):
        _settings.metadata({"save_t1": True})
    with pytest.raises(ValueError, match="compact says how the work is done"):
        _settings.metadata({"compact": False})
    with pytest.raises(TypeError, match="save_steps"):
        clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, save_steps=True)


def _flag_literals(tree, names):
    """Where the module `tree` writes an option flag's number itself: an int literal bound to a
    name of a flag (_SAVE = 32), or an operand of `&` (flags & 1)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            literal = node.value is not None and any(
                isinstance(v, ast.Constant) and type(v.value) is int for v in ast.walk(node.value))
            if literal and any(b.lstrip("_").removeprefix("OPTION_") in names for b in bound):
                found.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
            if any(isinstance(v, ast.Constant) and type(v.value) is int
                   for side in (node.left, node.right) for v in ast.walk(side)):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_of_the_package_retypes_an_option_flag(repo):
    names = {n.removeprefix("OPTION_") for n in _header_flags(repo)}
    root = pathlib.Path(clnode.__file__).parent
    modules = sorted(root.rglob("*.py"))
    assert root / "_solve.py" in modules and root / "_settings.py" in modules
    found = {str(p.relative_to(root)): hits for p in modules
             if (hits := _flag_literals(ast.parse(p.read_text(encoding="utf-8")), names))}
    assert not found, f"option flags written as numbers (use _clnode.OPTION_*): {found}"

