"""The vector field of a diffeqsolve call recognised from its computation.

The field f(t, y, args) is traced once per call (jax.make_jaxpr) with its one network (an
eqx.nn.MLP, or an eqx.nn.Sequential of eqx.nn.Linear and activations) replaced by an opaque
primitive, `net_p(x, *weights, *biases)`, and with every array leaf of the field (of its module
tree, or of what a plain function reads: its closure and the globals it names) an explicit input
of the trace. The trace is then read: every value that depends on t, y or args is *dynamic*, the
rest *static* (an expression of the leaves alone). A field is taken only when its dynamic part
is exactly

    out = net_p(x, params)            or    out = s * net_p(x, params)  (or net_p(...) * s)
    x   = y | concatenate([y, T]) | concatenate([y, A]) | concatenate([y, T, A])

with T the time t as a 1-vector (reshape or broadcast, possibly converted to y's dtype), A args
itself (one array of k values, possibly converted), s static of shape () or (N,), and the
network's parameters static: what the library computes (solve and reverse pass). The static
part (the parameters as the field makes them, s) is evaluated by JAX from the leaves: JAX
differentiates it itself, so that stop_gradient, exp(log_scale), masks and frozen leaves reach
the leaves exactly as diffrax's gradient does. The network's activations are identified by the
structure of their own trace (after inlining jax.jit calls), equal to that of one of the
library's (jax.nn.relu, jnp.tanh, jax.nn.sigmoid, jax.nn.softplus, jax.nn.silu, jax.nn.gelu with
approximate=True, the identity), never by their values. Anything else is refused with a Refusal
naming the construct."""
import dataclasses
import functools
import re
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jax.extend.core import Literal, Primitive

from .. import _model


class Refusal(ValueError):
    """A vector field (or another argument) clnode does not solve, with the reason."""


class Untraceable(Refusal):
    """A field that cannot be traced as f(t, y, args) with its network as one opaque call."""




# ------------------------------------------------------------------------------------------------
# the traced graph: jaxprs flattened (jax.jit calls inlined) into nodes


@dataclasses.dataclass(eq=False)
class _Eqn:
    prim: Any
    params: Dict[str, Any]
    ins: List["_Node"]


@dataclasses.dataclass(eq=False)
class _Node:
    """A value of the trace: an input of the trace (index), a constant (value: a literal or a
    closed-over array, possibly a tracer of an enclosing transformation) or an output of an
    equation (eqn, out)."""
    aval: Any
    index: int = -1
    value: Any = None
    eqn: Optional[_Eqn] = None
    out: int = 0
    dynamic: bool = False
    is_const: bool = False


_INLINED = ("jit", "pjit", "closed_call", "core_call")


def _walk(jaxpr, ins: Sequence[_Node], consts: Sequence[_Node]) -> List[_Node]:
    """The output nodes of `jaxpr` with its inputs and constants the given nodes; jax.jit calls
    (and plain calls) inlined, every other equation a node."""
    env: Dict[Any, _Node] = {}
    for v, n in zip(jaxpr.constvars, consts):
        env[v] = n
    for v, n in zip(jaxpr.invars, ins):
        env[v] = n

    def read(a):
        if isinstance(a, Literal):
            return _Node(a.aval, value=a.val, is_const=True)
        return env[a]

    for eqn in jaxpr.eqns:
        args = [read(a) for a in eqn.invars]
        name = eqn.primitive.name
        sub = eqn.params.get("jaxpr") if name in _INLINED else None
        if sub is not None and hasattr(sub, "jaxpr"):  # a ClosedJaxpr
            outs = _walk(sub.jaxpr, args, [_Node(_aval(c), value=c, is_const=True)
                                           for c in sub.consts])
        elif sub is not None:  # a Jaxpr without constants
            outs = _walk(sub, args, [])
        else:
            e = _Eqn(eqn.primitive, dict(eqn.params), args)
            dyn = any(a.dynamic for a in args)
            outs = [_Node(v.aval, eqn=e, out=i, dynamic=dyn) for i, v in enumerate(eqn.outvars)]
        for v, n in zip(eqn.outvars, outs):
            env[v] = n
    return [read(a) for a in jaxpr.outvars]


def _aval(x):
    return jax.typeof(x)


def _graph(closed, dynamic_from: Optional[int] = None) -> Tuple[List[_Node], List[_Node]]:
    """(input nodes, output nodes) of a ClosedJaxpr; the inputs from index dynamic_from on (and
    everything computed from them) dynamic."""
    ins = [_Node(v.aval, index=i, dynamic=dynamic_from is not None and i >= dynamic_from)
           for i, v in enumerate(closed.jaxpr.invars)]
    consts = [_Node(_aval(c), value=c, is_const=True) for c in closed.consts]
    return ins, _walk(closed.jaxpr, ins, consts)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _param_key(v):
    if hasattr(v, "jaxpr") and hasattr(v, "consts"):  # ClosedJaxpr
        return ("closed",) + _structure(v)
    if hasattr(v, "eqns") and hasattr(v, "invars"):  # Jaxpr
        return ("closed",) + _structure(jax.extend.core.ClosedJaxpr(v, []))
    if callable(v):
        return ("fn", getattr(v, "__qualname__", getattr(v, "__name__", type(v).__name__)))
    if isinstance(v, (tuple, list)):
        return tuple(_param_key(x) for x in v)
    return _ADDRESS.sub("", repr(v))


def _structure(closed) -> tuple:
    """A comparable key of what a ClosedJaxpr computes: its equations (jax.jit calls inlined) in
    order, each with its primitive, parameters and where its operands come from (an input, a
    constant's value, an earlier equation's output); only what reaches the outputs."""
    ins, outs = _graph(closed)
    order: Dict[int, int] = {}
    eqns: List[tuple] = []

    def ref(n: _Node):
        if n.eqn is None:
            if n.is_const:
                a = np.asarray(n.value) if not isinstance(n.value, jax.core.Tracer) else None
                return ("const", str(n.aval), None if a is None else a.tobytes())
            return ("in", n.index)
        return ("eq", visit(n.eqn), n.out)

    def visit(e: _Eqn) -> int:
        if id(e) not in order:
            operands = tuple(ref(a) for a in e.ins)
            params = tuple(sorted((k, _param_key(v)) for k, v in e.params.items()))
            eqns.append((e.prim.name, params, operands))
            order[id(e)] = len(eqns) - 1
        return order[id(e)]

    out_refs = tuple(ref(n) for n in outs)
    return (tuple(str(n.aval) for n in ins), tuple(eqns), out_refs)


# ------------------------------------------------------------------------------------------------
# activations, by the structure of their trace


def _gelu_tanh(x):
    return jax.nn.gelu(x, approximate=True)


def _identity(x):
    return x


_REFERENCES = (("identity", _identity), ("relu", jax.nn.relu), ("tanh", jnp.tanh),
               ("sigmoid", jax.nn.sigmoid), ("softplus", jax.nn.softplus),
               ("silu", jax.nn.silu), ("gelu", _gelu_tanh))


@functools.lru_cache(maxsize=None)
def _reference_structures(dtype) -> Dict[tuple, str]:
    x = jax.ShapeDtypeStruct((), dtype)
    return {_structure(jax.make_jaxpr(f)(x)): name for name, f in _REFERENCES}


_KNOWN: Dict[Any, Optional[str]] = {}  # activation function -> its name (None: none of them)


def activation_name(fn: Any, dtype: Any = np.float64) -> Optional[str]:
    """The library's name of a scalar activation function (identified by the structure of its
    trace at a scalar of `dtype`, jax.jit calls inlined), or None when it computes something
    else (relu6, hard_tanh, exact gelu, a learnt activation...)."""
    dtype = np.dtype(dtype)
    try:
        key: Any = (fn, dtype)
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in _KNOWN:
        return _KNOWN[key]
    if jtu.tree_leaves(fn, is_leaf=lambda x: x is fn) != [fn] and any(
            hasattr(x, "shape") for x in jtu.tree_leaves(fn)):
        name = None  # an activation with arrays of its own (a learnt one)
    else:
        try:
            s = _structure(jax.make_jaxpr(fn)(jax.ShapeDtypeStruct((), dtype)))
        except Exception:  # noqa: BLE001 - not a function of one scalar
            s = None
        name = _reference_structures(dtype).get(s) if s is not None else None
    if key is not None:
        if len(_KNOWN) > 256:
            _KNOWN.clear()
        _KNOWN[key] = name
    return name


def _activation(fn, dtype, what):
    if fn is None:
        return "identity"
    name = activation_name(fn, dtype)
    if name is None:
        raise Refusal(f"{what} {_describe_fn(fn)} is none of the library's activations ("
                      + ", ".join(n for n, _ in _REFERENCES) + "; gelu: jax.nn.gelu's tanh "
                      "approximation), identified by what it computes (its jaxpr), not by its "
                      "values")
    return name


def _describe_fn(fn):
    inner = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
    name = getattr(fn, "__qualname__", None) or getattr(inner, "__qualname__", None)
    return name or repr(fn)


# ------------------------------------------------------------------------------------------------
# the network: found in the field's tree, replaced by net_p


net_p = Primitive("clnode_network")


def _net_abstract(x, *params, n_layers, has_bias, activation, final_activation):
    # the dtype JAX's own evaluation gives: the input's and the parameters' promoted
    dtype = jnp.result_type(x.dtype, *[p.dtype for p in params])
    return jax.core.ShapedArray((int(params[n_layers - 1].shape[0]),), dtype)


def _net_never(*args, **kw):
    raise Refusal("the field evaluates its network outside the trace clnode reads")


net_p.def_abstract_eval(_net_abstract)
net_p.def_impl(_net_never)


@dataclasses.dataclass(frozen=True)
class Network:
    """The network a field calls: where it was found (path), its activations' names, its
    layers' weight shapes and which have biases."""
    path: str
    activation: str
    final_activation: str
    weight_shapes: Tuple[Tuple[int, ...], ...]
    has_bias: Tuple[bool, ...]


def _path(keys, of_function):
    """A network's path in the field: jax's keystr, or for a plain function the name it reads
    (a closure variable or a global) and the path inside it."""
    s = jtu.keystr(keys)
    if of_function:
        s = re.sub(r"^\[[01]\]\['([^']*)'\]", r"\1", s)
    return s


def _parts(net, where):
    """(Linear layers, the activations between them, the final activation or None) of an
    eqx.nn.MLP or an eqx.nn.Sequential of Linear layers and activations; a Refusal for any
    other make."""
    import equinox as eqx
    layers: List[Any] = []
    acts: List[Any] = []
    final: Any = None
    if isinstance(net, eqx.nn.MLP):
        if getattr(net, "scan", False):
            raise Refusal(f"the network at {where} is an eqx.nn.MLP(scan=True)")
        layers, acts, final = list(net.layers), [net.activation], net.final_activation
    else:
        inner: List[Any] = []
        for m in net.layers:
            if isinstance(m, eqx.nn.Linear):
                if layers and len(inner) < len(layers):
                    inner.append(None)
                layers.append(m)
            else:
                if not layers or len(inner) >= len(layers):
                    raise Refusal(f"the eqx.nn.Sequential at {where} has {type(m).__name__} "
                                  "where clnode takes Linear, activation, Linear, ...")
                inner.append(m.fn if isinstance(m, eqx.nn.Lambda) else m)
        if not layers:
            raise Refusal(f"the eqx.nn.Sequential at {where} has no eqx.nn.Linear")
        final = inner[len(layers) - 1] if len(inner) >= len(layers) else None
        acts = inner[:len(layers) - 1] or [None]
    for layer in layers:
        if type(layer).__call__ is not eqx.nn.Linear.__call__:
            raise Refusal(f"the network at {where} has a {type(layer).__name__} with its own "
                          "__call__")
        if layer.in_features == "scalar" or layer.out_features == "scalar":
            raise Refusal(f"the network at {where} has a Linear layer with in_size or out_size "
                          "'scalar'; clnode takes vectors")
    return layers, acts, final


def _activation_names(acts, final, dtype, where):
    names = {_activation(jtu.tree_map(_model._first_of_vmapped, a) if a is not None else None,
                         dtype, f"the activation of {where}") for a in acts}
    if len(names) > 1:
        raise Refusal(f"the network at {where} has different activations between layers "
                      f"({sorted(names)}); clnode uses one")
    return names.pop(), _activation(final, dtype, f"the final activation of {where}")


def _call_network(self, x, *, key=None):
    """The stand-in's __call__: the network's computation as one net_p, its parameters (the
    stand-in's own leaves, as the field made them) its operands."""
    del key
    layers, acts, final = _parts(self, "the network the field calls")
    act, fact = _activation_names(acts, final, layers[0].weight.dtype,
                                  "the network the field calls")
    biases = [layer.bias for layer in layers if layer.bias is not None]
    return net_p.bind(x, *[layer.weight for layer in layers], *biases, n_layers=len(layers),
                      has_bias=tuple(layer.bias is not None for layer in layers),
                      activation=act, final_activation=fact)


_STAND_INS: Dict[type, type] = {}


def _stand_in(net):
    """The network as an instance of a subclass whose __call__ is _call_network: the same
    fields (the field may read, freeze or replace its parts with eqx.tree_at or tree_map), one
    opaque call in the trace."""
    base = type(net)
    cls = _STAND_INS.get(base)
    if cls is None:
        cls = types.new_class(f"_{base.__name__}Call", (base,),
                              exec_body=lambda ns: ns.update(__call__=_call_network,
                                                             __module__=__name__))
        _STAND_INS[base] = cls
    new: Any = object.__new__(cls)
    for f in dataclasses.fields(net):
        object.__setattr__(new, f.name, getattr(net, f.name))
    return new


def _network(tree, of_function=False) -> Tuple[Any, str]:
    """The one network of a pytree and its path (None, "" when there is none); Refusal when
    there is more than one, or one clnode does not solve."""
    import equinox as eqx
    nets = [(p, x) for p, x in jtu.tree_flatten_with_path(tree, is_leaf=_model._is_net)[0]
            if _model._is_net(x)]
    if not nets:
        return None, ""
    if len(nets) > 1:
        raise Refusal("more than one MLP found in the field (" + ", ".join(
            _path(p, of_function) or "<root>" for p, _ in nets) + "): clnode solves one")
    path, net = _path(nets[0][0], of_function), nets[0][1]
    where = path or "the root"
    base = eqx.nn.MLP if isinstance(net, eqx.nn.MLP) else eqx.nn.Sequential
    if type(net).__call__ is not base.__call__:
        raise Refusal(f"the network at {where} is a {type(net).__name__} with its own __call__")
    layers, acts, final = _parts(net, where)
    _activation_names(acts, final, layers[0].weight.dtype, where)
    return net, path


# ------------------------------------------------------------------------------------------------
# the field's tree, and the field rebuilt from it


def _field_tree(vf):
    """(tree, rebuild): a pytree holding everything the field reads that may hold arrays, and
    rebuild(tree) the field made of it. For a module (or any pytree that holds the network) the
    field itself; for a plain function, its closure cells' contents and the globals its code
    names."""
    if any(_model._is_net(x) for x in jtu.tree_leaves(vf, is_leaf=_model._is_net)) or \
            not hasattr(vf, "__code__"):
        return vf, (lambda tree: tree)
    code = vf.__code__
    cells = []
    for cell in vf.__closure__ or ():
        try:
            cells.append((True, cell.cell_contents))
        except ValueError:  # an empty cell
            cells.append((False, None))
    glb = {name: vf.__globals__[name] for name in code.co_names if name in vf.__globals__}
    names = list(code.co_freevars)

    def rebuild(tree):
        cs, g = [tree[0][name] for name in names], tree[1]
        new_globals = dict(vf.__globals__)
        new_globals.update(g)
        new_cells = tuple(types.CellType(v) if full else types.CellType()
                          for (full, _), v in zip(cells, cs))
        fn = types.FunctionType(code, new_globals, vf.__name__, vf.__defaults__,
                                new_cells if vf.__closure__ else None)
        fn.__kwdefaults__ = vf.__kwdefaults__
        return fn

    return ({name: v for name, (_, v) in zip(names, cells)}, glb), rebuild


def _is_array(x):
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


# ------------------------------------------------------------------------------------------------
# the recogniser


@dataclasses.dataclass(frozen=True)
class Field:
    """A recognised vector field: its network, how it is fed (time_input; k conditioning
    inputs), whether it has a factor s; and what to evaluate for the library's operands (the
    parameters in the library's flat order, the weights then the biases, and s) from the
    field's leaves: `operands(leaves)`."""
    network: Network
    time_input: bool
    inputs: int
    scaled: bool
    leaves: Tuple[Any, ...]
    _params: Tuple[_Node, ...]
    _scale: Optional[_Node]

    def operands(self) -> Tuple[List[Any], List[Optional[Any]], Optional[Any]]:
        """(weights, biases (None where a layer has none), s or None), evaluated by JAX from
        the field's leaves as the field computes them (differentiable, stop_gradient honoured;
        tracers of the caller's transformations stay tracers)."""
        cache: Dict[int, Any] = {}
        vals = [_evaluate(n, self.leaves, cache) for n in self._params]
        nl = len(self.network.weight_shapes)
        weights, rest = vals[:nl], iter(vals[nl:])
        biases = [next(rest) if hb else None for hb in self.network.has_bias]
        scale = None if self._scale is None else _evaluate(self._scale, self.leaves, cache)
        return weights, biases, scale


def _evaluate(node: _Node, leaves, cache):
    """A static node's value, by binding its equations (as jax.core.eval_jaxpr does)."""
    if node.eqn is None:
        return node.value if node.is_const else leaves[node.index]
    e = node.eqn
    if id(e) not in cache:
        ins = [_evaluate(a, leaves, cache) for a in e.ins]
        out = e.prim.bind(*ins, **e.prim.get_bind_params(e.params))
        cache[id(e)] = out if e.prim.multiple_results else [out]
    return cache[id(e)][node.out]


def _strip(n: _Node, ops=("copy", "copy_p")) -> _Node:
    while n.eqn is not None and n.eqn.prim.name in ops:
        n = n.eqn.ins[0]
    return n


# operations that take a part of an array or reshape it (followed back to name what a value is)
_PARTS = ("slice", "squeeze", "reshape", "broadcast_in_dim", "dynamic_slice", "gather",
          "convert_element_type", "expand_dims", "copy", "copy_p", "reduce_sum")


class _Reader:
    """Reads the dynamic part of a traced field (inputs: the leaves, then t, y, args)."""

    def __init__(self, n_leaves, leaf_names, y_dtype, one_args):
        self.T, self.Y = n_leaves, n_leaves + 1
        self.A = n_leaves + 2 if one_args else -2  # the args slot: args itself, one array
        self.leaf_names, self.y_dtype = leaf_names, np.dtype(y_dtype)

    def describe(self, n: _Node) -> str:
        """What the user wrote, as near as the trace says: t, y, args, a leaf's path, or an
        operation and its operands."""
        if n.eqn is None:
            if n.is_const:
                return "a constant"
            if n.index < len(self.leaf_names):
                return f"the leaf {self.leaf_names[n.index] or '<root>'}"
            return {self.T: "t", self.Y: "y"}.get(n.index, "args")
        e = n.eqn
        if e.prim is net_p:
            return "the network's output"
        return f"{e.prim.name}({', '.join(self._short(a) for a in e.ins)})"


    def _short(self, n: _Node, depth: int = 1) -> str:
        n = _strip(n)
        if n.eqn is None or n.eqn.prim is net_p:
            return self.describe(n)
        part = n
        while part.eqn is not None and part.eqn.prim.name in _PARTS:
            part = _strip(part.eqn.ins[0])
        if part is not n and part.eqn is None and not part.is_const and part.index >= self.T:
            return f"a part of {self.describe(part)} ({n.eqn.prim.name})"
        if not n.dynamic:
            leaves = self._leaves_of(n)
            return f"an expression of {', '.join(leaves)}" if leaves else "a constant"
        if depth == 0:
            return f"{n.eqn.prim.name}(...)"
        return f"{n.eqn.prim.name}({', '.join(self._short(a, depth - 1) for a in n.eqn.ins)})"

    def _leaves_of(self, n: _Node, limit: int = 3) -> List[str]:
        """The names of the leaves a static node is computed from (at most `limit`)."""
        found: List[str] = []
        stack, seen = [n], set()
        while stack and len(found) < limit:
            m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            if m.eqn is None:
                if not m.is_const and m.index < len(self.leaf_names):
                    found.append(f"the leaf {self.leaf_names[m.index] or '<root>'}")
            else:
                stack.extend(m.eqn.ins)
        return found

    def _through(self, n: _Node, shape_ops: Tuple[str, ...]) -> _Node:
        """n followed back through copies, conversions to y's dtype and `shape_ops`."""
        while n.eqn is not None:
            e = n.eqn
            if e.prim.name == "convert_element_type" and \
                    np.dtype(e.params["new_dtype"]) == self.y_dtype:
                n = e.ins[0]
            elif e.prim.name in shape_ops or e.prim.name in ("copy", "copy_p"):
                n = e.ins[0]
            else:
                break
        return n

    def time_slot(self, n: _Node) -> bool:
        """Whether n is t as a 1-vector (t[None], jnp.reshape(t, (1,)), .astype(y.dtype))."""
        ok = tuple(np.shape(n.aval)) == (1,) and np.dtype(n.aval.dtype) == self.y_dtype
        n = self._through(n, ("reshape", "broadcast_in_dim", "expand_dims"))
        return ok and n.eqn is None and not n.is_const and n.index == self.T

    def args_slot(self, n: _Node) -> bool:
        """Whether n is args itself (one array of k values, possibly .astype(y.dtype))."""
        ok = np.dtype(n.aval.dtype) == self.y_dtype
        n = self._through(n, ())
        return ok and n.eqn is None and not n.is_const and n.index == self.A

    def y_slot(self, n: _Node) -> bool:
        n = _strip(n)
        return n.eqn is None and not n.is_const and n.index == self.Y


def recognise(vf: Any, n: int, y_dtype: Any, t_dtype: Any, args: Any) -> Optional[Field]:
    """The vector field `vf` (called as vf(t, y, args), y of n values of y_dtype, t a scalar of
    t_dtype, args None or one array) recognised: a Field, None when no network is found in it,
    a Refusal naming the construct that is not one of the forms (the module's documentation)."""
    tree, rebuild = _field_tree(vf)
    net, path = _network(tree, tree is not vf)
    if net is None:
        return None
    where = path or "the root"
    stand_in = _stand_in(net)
    tree = jtu.tree_map(lambda x: stand_in if x is net else x, tree, is_leaf=_model._is_net)
    paths_leaves, treedef = jtu.tree_flatten_with_path(tree)
    leaves = [x for _, x in paths_leaves]
    arrays = [i for i, x in enumerate(leaves) if _is_array(x)]
    names = [jtu.keystr(paths_leaves[i][0]) for i in arrays]
    # args: its arrays are inputs of the trace (dynamic: per trajectory), the rest constants
    a_leaves, a_def = jtu.tree_flatten(args)
    a_arrays = [i for i, x in enumerate(a_leaves) if _is_array(x)]
    one_args = _is_array(args) and np.ndim(args) == 1  # the one form clnode feeds its network

    def field(array_leaves, t, y, a_array_leaves):
        full = list(leaves)
        for i, x in zip(arrays, array_leaves):
            full[i] = x
        a_full = list(a_leaves)
        for i, x in zip(a_arrays, a_array_leaves):
            a_full[i] = x
        f = rebuild(jtu.tree_unflatten(treedef, full))
        return f(t, y, jtu.tree_unflatten(a_def, a_full))

    spec = [jax.ShapeDtypeStruct(np.shape(leaves[i]), leaves[i].dtype) for i in arrays]
    a_spec = [jax.ShapeDtypeStruct(np.shape(a_leaves[i]), jnp.result_type(a_leaves[i]))
              for i in a_arrays]
    try:
        closed, out_shape = jax.make_jaxpr(field, return_shape=True)(
            spec, jax.ShapeDtypeStruct((), t_dtype), jax.ShapeDtypeStruct((n,), y_dtype), a_spec)
    except Refusal:
        raise
    except Exception as e:  # noqa: BLE001 - what the field does with the stand-in
        raise Untraceable(f"the field could not be traced with its network ({where}) as one "
                          f"opaque call: {type(e).__name__}: {e}") from None
    n_leaves = len(arrays)
    ins, outs = _graph(closed, n_leaves)
    reader = _Reader(n_leaves, names, y_dtype, one_args)
    if len(outs) != 1 or tuple(np.shape(outs[0].aval)) != (n,) or \
            np.dtype(outs[0].aval.dtype) != np.dtype(y_dtype):
        raise Refusal(f"the field returns {out_shape} rather than one array of y's shape ({n},) "
                      f"and dtype {np.dtype(y_dtype)}")
    out = _strip(outs[0])
    scale = None
    if out.eqn is not None and out.eqn.prim.name == "mul":
        a, b = out.eqn.ins
        if a.dynamic and not b.dynamic:
            out, scale = _strip(a), b
        elif b.dynamic and not a.dynamic:
            out, scale = _strip(b), a
    if out.eqn is None or out.eqn.prim is not net_p:
        raise Refusal(_form_message(reader, outs[0], where))
    if scale is not None and (tuple(np.shape(scale.aval)) not in ((), (n,)) or
                              np.dtype(scale.aval.dtype) != np.dtype(y_dtype)):
        raise Refusal(f"the field multiplies its network's output ({where}) by a factor of "
                      f"{scale.aval.str_short()} (clnode takes a scalar or one value per "
                      f"component of dtype {np.dtype(y_dtype)})")
    call = out.eqn
    x, params = call.ins[0], call.ins[1:]
    if _calls_network(list(params) + ([scale] if scale is not None else [])):
        raise Refusal(f"the field calls its network ({where}) more than once (its factor or "
                      "its parameters come from another call)")
    nl = call.params["n_layers"]
    info = Network(path, call.params["activation"], call.params["final_activation"],
                   tuple(tuple(np.shape(p.aval)) for p in params[:nl]),
                   tuple(call.params["has_bias"]))
    for i, p in enumerate(params):
        if p.dynamic:
            raise Refusal(f"the parameters of the network ({where}) depend on t, y or args ("
                          f"{reader.describe(p)})")
        if jnp.promote_types(p.aval.dtype, y_dtype) != np.dtype(y_dtype):
            raise Refusal(f"the network ({where}) has parameters of dtype {p.aval.dtype} and "
                          f"the state is {np.dtype(y_dtype)} (JAX computes that field in "
                          "another precision than the state's)")
    k = int(np.shape(args)[0]) if one_args else 0
    time_input, inputs = _input_form(reader, x, where)
    if inputs and not k:
        raise Refusal(f"the network's input ({where}) is not [y], [y, t], [y, args] or "
                      "[y, t, args]")
    n_in = info.weight_shapes[0][1]
    fed = n + time_input + (k if inputs else 0)
    if n_in != fed or info.weight_shapes[-1][0] != n:
        form = "[y" + (", t" if time_input else "") + (", args" if inputs else "") + "]"
        raise Refusal(f"the MLP found ({where}) takes {n_in} inputs and has "
                      f"{info.weight_shapes[-1][0]} outputs; the field feeds it {form} ({fed} "
                      f"values) for y0 of {n} components")
    return Field(info, bool(time_input), k if inputs else 0, scale is not None,
                 tuple(leaves[i] for i in arrays), tuple(params), scale)


def _input_form(reader: _Reader, x: _Node, where: str) -> Tuple[bool, bool]:
    """(time_input, with args) of the network's input node x; a Refusal otherwise."""
    x = _strip(x)
    if reader.y_slot(x):
        return False, False
    if x.eqn is not None and x.eqn.prim.name == "concatenate" and \
            x.eqn.params.get("dimension") == 0:
        parts = x.eqn.ins
        if parts and reader.y_slot(parts[0]):
            rest = parts[1:]
            ti = bool(rest) and reader.time_slot(rest[0])
            rest = rest[1:] if ti else rest
            if len(rest) == 1 and reader.args_slot(rest[0]):
                return ti, True
            if not rest and ti:
                return True, False
    raise Refusal(f"the network ({where}) is called on {reader.describe(x)}, not on y, "
                  "[y, t], [y, args] or [y, t, args] (clnode feeds the network itself)")


def _calls_network(nodes: Sequence[_Node]) -> bool:
    """Whether any of the (static) nodes is computed with a call of the network."""
    stack, seen = list(nodes), set()
    while stack:
        m = stack.pop()
        if m.eqn is None or id(m.eqn) in seen:
            continue
        if m.eqn.prim is net_p:
            return True
        seen.add(id(m.eqn))
        stack.extend(m.eqn.ins)
    return False


def _reaches_net(n: _Node) -> bool:
    """Whether n is the network's output, or a product of it and a constant of the leaves."""
    n = _strip(n)
    if n.eqn is not None and n.eqn.prim.name == "mul":
        dyn = [a for a in n.eqn.ins if a.dynamic]
        if len(dyn) == 1:
            n = _strip(dyn[0])
    return n.eqn is not None and n.eqn.prim is net_p


def _form_message(reader: _Reader, out: _Node, where: str) -> str:
    out = _strip(out)
    if out.eqn is None or not out.dynamic:
        return (f"the field's value does not come from its network ({where}): it is "
                f"{reader.describe(out)}")
    name = out.eqn.prim.name
    if name == "mul" and any(_reaches_net(a) for a in out.eqn.ins):
        return (f"the field multiplies its network's output ({where}) by a factor that "
                f"depends on t, y or args ({reader.describe(out)}); clnode takes a factor s "
                "of the leaves alone, s * MLP(...)")
    if name in ("add", "sub") and any(_reaches_net(a) for a in out.eqn.ins):
        what = "adds a term to" if name == "add" else "subtracts a term from"
        return (f"the field {what} its network's output ({where}): {reader.describe(out)}; "
                "clnode solves s * MLP(...), a factor of the leaves alone times the network, "
                "with no term added")
    if name == "div" and _reaches_net(out.eqn.ins[0]):
        return (f"the field divides its network's output ({where}): {reader.describe(out)}; "
                "clnode solves s * MLP(...) (one multiplication)")
    return (f"the field's value is {reader.describe(out)} rather than its network's output "
            f"({where}) or a factor of the leaves times it")
