"""MLP vector fields: from arrays, safetensors files, equinox modules and PyTorch models."""
import json
import os
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _args, _clnode

# the library's activations, in the order of their codes
ACTIVATIONS: Tuple[str, ...] = _clnode.activation_names()


class MLP:
    """A multilayer perceptron vector field, dy/dt = MLP(y) (or MLP([y, t]) with time_input, and
    with `inputs` = k conditioning inputs c, constant per trajectory: MLP([y, c]) or
    MLP([y, t, c]), c passed to each solve as `args`), optionally times an output scale:
    dy/dt = out_scale * MLP(...), out_scale a scalar or one value per component (N,), one
    multiplication after the final activation in the state precision, as JAX computes
    `out_scale * mlp(y)` (diffrax's neural ODE example).

    Layer i computes h_{i+1} = act_i(W_i h_i + b_i), W_i of shape (out, in) as in
    torch.nn.Linear and equinox.nn.Linear; every layer but the last uses `activation`, the last
    `final_activation`. Parameters are kept in float64 (a solve rounds them to its precision).
    Activations: "identity", "relu", "tanh", "sigmoid", "softplus", "silu" and "gelu" (the tanh
    approximation, as jax.nn.gelu's default). Immutable.

        MLP([w0, w1], [b0, b1], activation="softplus")   # numpy arrays (out x in), biases or None
        MLP([w0, w1], activation="tanh", inputs=3)        # w0 of shape (width, N + 3)
        MLP([w0, w1], final_activation="tanh", out_scale=0.8)
        MLP.load("model.safetensors"); seed_model(); from_equinox(m); from_torch(net)
    """

    __slots__ = ("_m",)

    def __init__(self, weights: Sequence[npt.ArrayLike],
                 biases: Optional[Sequence[Optional[npt.ArrayLike]]] = None, *,
                 activation: str = "relu", final_activation: str = "identity",
                 time_input: bool = False, inputs: int = 0,
                 out_scale: Optional[npt.ArrayLike] = None) -> None:
        ws = _layer_arrays(weights, "weights", 2)
        bs = [None] * len(ws) if biases is None else _layer_arrays(biases, "biases", 1)
        for name, v in (("activation", activation), ("final_activation", final_activation)):
            _args.name_string(v, name)
        scale = _out_scale_arg(out_scale, int(ws[-1].shape[0]) if ws and ws[-1] is not None
                               else 0)
        self._m = _clnode.Model.from_arrays(ws, bs, activation, final_activation,
                                            _args.boolean(time_input, "time_input"),
                                            _num_inputs(inputs), scale)

    @classmethod
    def _wrap(cls, m: _clnode.Model) -> "MLP":
        self = cls.__new__(cls)
        self._m = m
        return self

    @classmethod
    def load(cls, path: "Union[str, os.PathLike[str]]") -> "MLP":
        """Loads a safetensors file (the names and metadata of the C library: "layers.<i>.weight"
        / "layers.<i>.bias" or "<i>.weight" / "<i>.bias", the output scale "out_scale",
        metadata "activation", "final_activation", "time_input", "inputs"; the solve settings
        "clnode.<name>" that save(settings=...) writes are for clnode-solve --model, and not
        read here). Raises clnode.ModelError (a ValueError) for a malformed file,
        clnode.FileError (an OSError) for an unreadable one."""
        try:
            path = os.fspath(path)
        except TypeError:
            raise TypeError(f"path must be a file path (str or os.PathLike), not "
                            f"{type(path).__name__}") from None
        return cls._wrap(_clnode.Model.load(path))

    @classmethod
    def from_bytes(cls, data: bytes) -> "MLP":
        """The same from the bytes of a safetensors file."""
        return cls._wrap(_clnode.Model.from_bytes(data))

    def to_bytes(self, dtype: Any = "float64", *,
                 settings: Optional[Mapping[str, Any]] = None) -> bytes:
        """The model as safetensors bytes (equinox names "layers.<i>.weight"/"layers.<i>.bias",
        and "out_scale" (shape [] for one value, [N] for one per component) for a model with an
        output scale; tensors in `dtype`: "float64" (exact) or "float32").

        settings: the solve the model was trained with, as clnode.solve's keywords (t0, t1,
        dt0 (dt0="auto": "clnode.dt0_auto"), saveat=clnode.SaveAt(...) with ts of shape (T,),
        and the options of clnode.OPTIONS: method, precision, rtol, atol, max_steps, ...; not
        those that change no result), each checked as clnode.solve checks it; written as the
        string metadata "clnode.<name>" ("clnode.save_t0", "clnode.save_t1",
        "clnode.save_steps" and "clnode.save_ts" for saveat), which `clnode-solve --model FILE`
        takes as its defaults (doc/deploy.md). Those left out: the library's defaults
        (clnode.solve's)."""
        try:  # not None, which numpy reads as float64
            dt = None if dtype is None else np.dtype(dtype)
        except TypeError:
            dt = None
        code = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32"}.get(dt)
        if code is None or dt is None:
            raise ValueError(f"dtype must be float64 or float32, not {dtype}")
        header: Dict[str, Any] = {"__metadata__": {
            "activation": self.activation, "final_activation": self.final_activation,
            "time_input": "true" if self.time_input else "false"}}
        if self.num_inputs:
            header["__metadata__"]["inputs"] = str(self.num_inputs)
        if settings is not None:
            from . import _settings  # it needs clnode.solve's module, which imports this one
            header["__metadata__"].update(_settings.metadata(settings))
        tensors: List[Tuple[str, np.ndarray]] = []
        for i, (w, b) in enumerate(self.layers):
            tensors += [(f"layers.{i}.{name}", a) for name, a in (("weight", w), ("bias", b))
                        if a is not None]
        scale = self.out_scale
        if scale is not None:
            tensors.append(("out_scale", scale.reshape(()) if scale.size == 1 else scale))
        blobs, off = [], 0
        for key, a in tensors:
            raw = np.ascontiguousarray(a, dtype=dt.newbyteorder("<")).tobytes()
            header[key] = {"dtype": code, "shape": list(a.shape),
                           "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        return struct.pack("<Q", len(h)) + h + b"".join(blobs)

    def save(self, path: "Union[str, os.PathLike[str]]", dtype: Any = "float64", *,
             settings: Optional[Mapping[str, Any]] = None) -> None:
        """Writes the model as a safetensors file that MLP.load, clnode-solve --model and the C
        library read, with the solve settings it was trained with where given (see to_bytes:
        clnode-solve --model takes them as its defaults)."""
        data = self.to_bytes(dtype, settings=settings)
        with open(path, "wb") as f:
            f.write(data)

    @property
    def sizes(self) -> Tuple[int, ...]:
        """The widths (in, hidden..., out) as a tuple."""
        return self._m.sizes

    @property
    def dim(self) -> int:
        """The state dimension N (the output width)."""
        return self._m.sizes[-1]

    @property
    def num_layers(self) -> int:
        """The number of Linear layers."""
        return len(self._m.sizes) - 1

    @property
    def layers(self) -> List[Tuple[np.ndarray, Optional[np.ndarray]]]:
        """[(weight (out, in), bias (out,) or None), ...] as float64 copies."""
        return [self._m.layer(i) for i in range(self.num_layers)]

    @property
    def weights(self) -> List[np.ndarray]:
        """The weight matrices (float64 copies)."""
        return [w for w, _ in self.layers]

    @property
    def biases(self) -> List[Optional[np.ndarray]]:
        """The biases (float64 copies; None where a layer has none)."""
        return [b for _, b in self.layers]

    @property
    def activation(self) -> str:
        """The activation between layers (a name)."""
        return self._m.activation

    @property
    def final_activation(self) -> str:
        """The activation after the last layer (a name)."""
        return self._m.final_activation

    @property
    def time_input(self) -> bool:
        """Whether the network takes [y, t] rather than y."""
        return self._m.time_input

    @property
    def num_inputs(self) -> int:
        """The number k of conditioning inputs (0: none): the network takes [y, c] (or
        [y, t, c]), c a per-trajectory constant vector of k values (a solve's `args`)."""
        return self._m.num_inputs

    @property
    def out_scale(self) -> Optional[np.ndarray]:
        """The output scale the network's output is multiplied by: None, or a float64 array of 1
        value (a scalar) or N (one per component)."""
        return self._m.out_scale

    def __call__(self, y: npt.ArrayLike, t: Optional[npt.ArrayLike] = None,
                 args: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """The vector field at y ((N,) or (n, N)), with times t for a time-input model and the
        conditioning inputs `args` ((k,) or (n, k)) for a model with inputs, output scale
        included, in float64, by the C library (clnode_model_eval_inputs: the activations every
        backend uses)."""
        y = _args.real_array(y, "y", finite=False)
        if y.ndim not in (1, 2):
            raise ValueError(f"y must have shape (N,) or (n, N), not {y.shape}")
        single = y.ndim == 1
        y2 = y.reshape(1, -1) if single else y
        tt = None
        if self.time_input:
            if t is None:
                raise ValueError("this model takes time as an input: pass t")
            tt = _args.real_array(t, "t", finite=False)
            if tt.ndim != 0 and tt.shape != (y2.shape[0],):
                raise ValueError(f"t must be a scalar or one time per point (shape "
                                 f"({y2.shape[0]},)), not of shape {tt.shape}")
            tt = np.broadcast_to(tt, (y2.shape[0],))
        elif t is not None:
            raise ValueError("this model does not take time as an input (time_input=False): t "
                             "must be None")
        k = self.num_inputs
        c = None
        if k == 0:
            if args is not None:
                raise ValueError("this model has no conditioning inputs: args must be None")
        else:
            if args is None:
                raise ValueError(f"this model takes {k} conditioning inputs: pass args")
            c = _args.real_array(args, "args", finite=False)
            if c.shape not in ((k,), (y2.shape[0], k)):
                raise ValueError(f"args must have shape ({k},) or ({y2.shape[0]}, {k}), not "
                                 f"{c.shape}")
            c = np.broadcast_to(c, (y2.shape[0], k))
        out = self._m.eval(y2, tt, c)
        return out[0] if single else out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MLP):
            return NotImplemented
        if (self.sizes, self.activation, self.final_activation, self.time_input,
                self.num_inputs) != (other.sizes, other.activation, other.final_activation,
                                     other.time_input, other.num_inputs):
            return False
        s, s2 = self.out_scale, other.out_scale
        if (s is None) != (s2 is None) or (s is not None and s2 is not None and
                                           not np.array_equal(s, s2)):
            return False
        for (w, b), (w2, b2) in zip(self.layers, other.layers):
            if not np.array_equal(w, w2) or (b is None) != (b2 is None) or \
                    (b is not None and b2 is not None and not np.array_equal(b, b2)):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable equality: unhashable

    def __repr__(self):
        s = self.out_scale
        scale = "" if s is None else \
            f", out_scale={float(s[0])!r}" if s.size == 1 else f", out_scale={s.tolist()!r}"
        return (f"clnode.MLP(sizes={self.sizes}, activation={self.activation!r}, "
                f"final_activation={self.final_activation!r}, time_input={self.time_input}"
                + (f", inputs={self.num_inputs}" if self.num_inputs else "") + scale + ")")


def flat_params(layers: Sequence[Tuple[Any, Optional[Any]]]) -> List[Any]:
    """The parameters of `layers` ((weight, bias or None) per layer) in the library's flat order
    (clnode_gradient_params): layer 0's weight then its bias (if any), layer 1's, ... (the output
    scale, where there is one, follows them there). Arrays of any kind (numpy, JAX)."""
    return [a for w, b in layers for a in (w, b) if a is not None]


def layers_of_flat(flat: np.ndarray,
                   shapes: Sequence[Tuple[Tuple[int, ...], Optional[Tuple[int, ...]]]]
                   ) -> List[Tuple[np.ndarray, Optional[np.ndarray]]]:
    """The layers ((weight, bias or None) per layer, of `shapes`: (weight shape, bias shape or
    None) per layer) of the 1-d array `flat` laid out in flat_params's order."""
    layers: List[Tuple[np.ndarray, Optional[np.ndarray]]] = []
    off = 0

    def part(shape):
        nonlocal off
        size = int(np.prod(shape))
        off += size
        return flat[off - size:off].reshape(shape)

    for ws, bs in shapes:
        w = part(ws)
        layers.append((w, None if bs is None else part(bs)))
    if off != np.size(flat):
        raise ValueError(f"{np.size(flat)} parameters for layers of {off}")
    return layers


def _layer_arrays(arrays, name, ndim):
    """MLP's weights (ndim 2) or biases (ndim 1, None for a layer without): a sequence (not one
    array) of real arrays, each of exactly `ndim` dimensions, as float64 (non-finite values are
    left to the library, which refuses them naming the layer)."""
    if isinstance(arrays, (str, bytes, np.ndarray)) or not hasattr(arrays, "__iter__"):
        raise TypeError(f"{name} must be a list of arrays (one per layer), not "
                        f"{type(arrays).__name__}")
    out: List[Optional[np.ndarray]] = []
    for i, a in enumerate(arrays):
        if a is None and ndim == 1:
            out.append(None)
            continue
        a = _args.real_array(a, f"{name}[{i}]", finite=False)
        if a.ndim != ndim:
            raise ValueError(f"{name}[{i}] must be a {ndim}-d array, not of shape {a.shape}")
        out.append(a)
    return out


def _num_inputs(inputs):
    """A number of conditioning inputs, checked: a non-negative integer."""
    if isinstance(inputs, (bool, np.bool_)) or not isinstance(inputs, (int, np.integer)) \
            or inputs < 0:
        raise ValueError(f"inputs must be a non-negative integer (the number of conditioning "
                         f"inputs), not {inputs!r}")
    return int(inputs)


def _out_scale_arg(out_scale, dim):
    """MLP's out_scale, checked: None, or a real scalar or an array of shape (1,) or (dim,) of
    finite real values, as a 1-d float64 array (booleans, complex and other shapes refused,
    naming out_scale)."""
    if out_scale is None:
        return None
    a = _args.real_array(out_scale, "out_scale")
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1 or a.shape[0] not in (1, dim):
        raise ValueError(f"out_scale must be a scalar or an array of shape (1,) or ({dim},) (one "
                         f"value per component of the state), not of shape {a.shape}")
    return a


def seed_model() -> MLP:
    """The built-in seed model: eqx.nn.MLP(10 -> 100 -> 100 -> 10, softplus, PRNGKey(42)), the
    model of the original TF32 failure report (14 Tsit5 steps on [0, 50] from y0 = 0 in fp32)."""
    return MLP._wrap(_clnode.Model.seed())


# ------------------------------------------------------------------------------------------------
# Activation functions of the frameworks, identified by name or by what they compute


def _first_of_vmapped(x: Any) -> Any:
    """An array leaf's first entry along its first axis; other leaves as they are."""
    ndim = getattr(x, "ndim", 0)
    return x[0] if hasattr(x, "shape") and ndim else x


def _jax_activation_name(fn: Any, dtype: Any = np.float64) -> str:
    """The library's name of a JAX activation function, identified by what it computes (the
    structure of its trace, clnode.jax's recogniser), never by its values."""
    import jax.tree_util as jtu

    from .jax import _field as _jax_field
    if isinstance(fn, str):
        return fn
    # equinox.nn.MLP keeps its activation vmapped over (depth, width) to allow learnt ones;
    # a plain function comes back unchanged
    fn = jtu.tree_map(_first_of_vmapped, fn)
    name = _jax_field.activation_name(fn, dtype)
    if name is None:
        raise ValueError(f"unsupported activation {fn!r}: none of the library's activations "
                         f"({', '.join(ACTIVATIONS)}; gelu: jax.nn.gelu's tanh approximation), "
                         "identified by what it computes (its jaxpr), not by its values")
    return name


# ------------------------------------------------------------------------------------------------
# equinox


def _find_equinox_mlp(tree):
    """[(path, layers [(W, b or None)], activation fn, final activation fn)] of every
    eqx.nn.MLP and every eqx.nn.Sequential of Linear and activation layers in a pytree; the
    arrays are left as they are (JAX arrays or tracers)."""
    import equinox as eqx
    import jax.tree_util as jtu

    def is_net(x):
        return isinstance(x, (eqx.nn.MLP, eqx.nn.Sequential))

    found: List[Tuple[str, list, Any, Any]] = []
    leaves = jtu.tree_flatten_with_path(tree, is_leaf=is_net)[0]
    for path, leaf in leaves:
        if isinstance(leaf, eqx.nn.MLP):
            layers = [(l.weight, l.bias) for l in leaf.layers]
            found.append((jtu.keystr(path), layers, leaf.activation, leaf.final_activation))
        elif isinstance(leaf, eqx.nn.Sequential):
            layers, acts, final = [], [], None  # type: ignore[var-annotated]
            for m in leaf.layers:
                if isinstance(m, eqx.nn.Linear):
                    if layers and len(acts) < len(layers):
                        acts.append(None)  # Linear after Linear: identity between them
                    layers.append((m.weight, m.bias))
                elif isinstance(m, eqx.nn.Lambda) or callable(m):
                    fn = m.fn if isinstance(m, eqx.nn.Lambda) else m
                    if not layers or len(acts) >= len(layers):
                        raise ValueError(f"{jtu.keystr(path)}: eqx.nn.Sequential with an "
                                         "activation that does not follow a Linear layer; clnode "
                                         "supports Linear, activation, Linear, ... (one "
                                         "activation between layers)")
                    acts.append(fn)
            if not layers:
                continue
            final = acts[len(layers) - 1] if len(acts) >= len(layers) else None
            inner = acts[:len(layers) - 1]
            found.append((jtu.keystr(path), layers, inner, final))
    return found


def _closure_objects(fn):
    """What a plain Python function reads besides its arguments: the contents of its closure
    cells and the globals its code names (e.g. the `mlp` of `lambda t, y, args: mlp(y)`)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    objs = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            objs.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    glb = getattr(fn, "__globals__", {})
    objs += [glb[name] for name in code.co_names if name in glb]
    return objs


def _leaf_name(path):
    """The field, key or index name of a pytree path's last entry ("" for the root)."""
    if not path:
        return ""
    k = path[-1]
    for attr in ("name", "key", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _find_scale(tree, dim, skip):
    """[(path, value)] of the leaves of a pytree outside its networks (`skip` tells them) whose
    field name contains "scale" and that are a real scalar or an array of shape (), (1,) or
    (dim,): the candidates for an output scale."""
    import jax.tree_util as jtu
    found = []
    for path, leaf in jtu.tree_flatten_with_path(tree, is_leaf=skip)[0]:
        if skip(leaf) or "scale" not in _leaf_name(path).lower():
            continue
        if isinstance(leaf, (bool, np.bool_)):
            continue
        shape = tuple(getattr(leaf, "shape", ())) if hasattr(leaf, "shape") else (
            () if isinstance(leaf, (int, float, np.number)) else None)
        if shape in ((), (1,), (dim,)):
            found.append((jtu.keystr(path), leaf))
    return found


def _takes_t_y_args(fn):
    """Whether fn is called as a vector field, fn(t, y, args): three positional parameters."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(pos) == 3 and not any(p.kind == p.VAR_POSITIONAL for p in params)


def _constant_factor(rows):
    """A vector field's factor of its network's output, from its values at several points (rows
    of N, the field evaluated with the network replaced by ones), as one model's output scale:
    (scale, None), scale 1 value when every component's is the same, else N; or (None, why)
    when it is none: it "is not finite" or "changes with y or t". The drop-in and from_equinox
    both read it so."""
    sv = np.asarray(rows, np.float64)
    sv = sv.reshape(sv.shape[0], -1)
    if not np.all(np.isfinite(sv)):
        return None, "is not finite"
    if not np.all(sv == sv[0]):
        return None, "changes with y or t"
    s = sv[0]
    return (s[:1] if np.all(s == s[0]) else np.ascontiguousarray(s)), None


def _field_factor(module, n, k, time_input, dtype):
    """The factor a vector field f(t, y, args) multiplies its network's output by (N values, or
    1 for one value for every component; ones when it has none), read as the drop-in reads it:
    the field recognised from its computation (clnode.jax's recogniser, clnode.jax._field), the
    factor evaluated from the leaves. None when the module is not called as a field (or cannot be
    traced as one); a ValueError naming the construct when it is a field of another form."""
    if not _takes_t_y_args(module):
        return None
    from .jax import _field as _jax_field
    args = np.zeros((k,), dtype) if k else None
    try:
        field = _jax_field.recognise(module, n, dtype, dtype, args)
    except _jax_field.Untraceable:
        return None
    if field is None:
        return None
    if field.time_input != time_input or field.inputs != k:
        fed = "[y" + (", t" if field.time_input else "") + (", args" if field.inputs else "")
        raise ValueError(f"the vector field feeds its network {fed}], not what time_input="
                         f"{time_input} and inputs={k} say")
    scale = field.operands()[2]
    if scale is None:
        return np.ones(1)
    found, why = _constant_factor(np.broadcast_to(np.asarray(scale, np.float64), (1, n)))
    if why:
        raise ValueError(f"the vector field multiplies its network's output by a factor that "
                         f"{why}: clnode solves out_scale * MLP(...) with out_scale finite")
    return found


def _is_net(x):
    import equinox as eqx
    return isinstance(x, (eqx.nn.MLP, eqx.nn.Sequential))


def _equinox_scale(module, dim):
    """The output scale found in an equinox module tree (or what a plain function reads), as
    from_equinox documents: the one leaf named like "*scale*" outside the network, or None."""
    import equinox as eqx

    def is_net(x):
        return isinstance(x, (eqx.nn.MLP, eqx.nn.Sequential))

    tree = module
    if callable(module) and hasattr(module, "__code__") and not _find_equinox_mlp(module):
        tree = _closure_objects(module)
    found = _find_scale(tree, dim, is_net)
    if len(found) > 1:
        raise ValueError("more than one output scale candidate (" + ", ".join(
            p or "<root>" for p, _ in found) + "): pass the one the field multiplies by as "
            "out_scale= (out_scale=1.0: none)")
    return found[0][1] if found else None


def _equinox_parts(module, time_input=None):
    """The pieces of the one MLP found in an equinox module tree: (layers, activation name,
    final activation name, time_input, path); layers hold the pytree's own arrays. A plain
    function (a lambda) whose pytree holds no MLP is searched through what it reads: its closure
    and the globals it names."""
    found = _find_equinox_mlp(module)
    if not found and callable(module) and hasattr(module, "__code__"):
        found = _find_equinox_mlp(_closure_objects(module))
    if not found:
        import jax.tree_util as jtu
        kinds = sorted({type(x).__name__ for x in jtu.tree_leaves(
            module, is_leaf=lambda x: not isinstance(x, (list, tuple, dict)))})[:12]
        raise ValueError(
            "no equinox.nn.MLP (or eqx.nn.Sequential of eqx.nn.Linear and activations) found in "
            f"{type(module).__name__} (its leaves: {', '.join(kinds) or 'none'}), nor in what a "
            "plain function reads (its closure and the globals it names). Keep the network as a "
            "field of an eqx.Module (class Func(eqx.Module): mlp: eqx.nn.MLP; def __call__(self, "
            "t, y, args): return self.mlp(y)) or let a lambda read it (lambda t, y, args: "
            "mlp(y))")
    if len(found) > 1:
        raise ValueError("more than one MLP found (" + ", ".join(p or "<root>" for p, *_ in found)
                         + "): clnode solves one MLP vector field; pass the one you mean")
    path, layers, act, fact = found[0]
    if isinstance(act, list):  # Sequential: one activation between every pair of layers
        names = {("identity" if a is None else _jax_activation_name(a)) for a in act}
        if len(names) > 1:
            raise ValueError(f"{path}: different activations between layers ({sorted(names)}); "
                             "clnode uses one activation between all layers")
        act_name = names.pop() if names else "identity"
    else:
        act_name = _jax_activation_name(act)
    fact_name = "identity" if fact is None else _jax_activation_name(fact)
    n_in = int(layers[0][0].shape[1])
    n_out = int(layers[-1][0].shape[0])
    if time_input is None:
        time_input = n_in == n_out + 1
    for w, b in layers:
        if len(w.shape) != 2 or (b is not None and len(b.shape) != 1):
            raise ValueError(f"{path}: a Linear layer with in_size or out_size 'scalar' "
                             f"(weight shape {tuple(w.shape)}); clnode needs vectors")
    return layers, act_name, fact_name, bool(time_input), path


def from_equinox(module: Any, *, time_input: Optional[bool] = None, inputs: int = 0,
                 out_scale: Optional[npt.ArrayLike] = None) -> MLP:
    """The MLP inside an equinox module tree: an `eqx.nn.MLP` (or an `eqx.nn.Sequential` of
    `eqx.nn.Linear` and activation layers) anywhere in `module` (e.g. the seed problem's
    `Func(eqx.Module)` holding `mlp`), with its activation read from the module (relu, tanh,
    sigmoid, softplus, silu, gelu with approximate=True, identity: identified by what the
    function computes, never by its values). `time_input`: whether the network takes [y, t]; None guesses it from the shapes (in == out + inputs + 1). `inputs`: the
    number k of conditioning inputs, for a network of y' = MLP([y, c]) (or MLP([y, t, c])), c
    passed to clnode.solve as args (diffrax's f(t, y, args) = mlp(jnp.concatenate([y, args])));
    its first layer takes N + k (or N + 1 + k) values. `out_scale`: the output scale of a field
    `out_scale * mlp(y)` (a scalar or one value per component). None (the default) finds it: for
    a vector field called as f(t, y, args) (an `eqx.Module` with such a `__call__`, or a
    function), the factor the field multiplies the network's output by, read as clnode.jax
    reads it (the field recognised from its computation: a leaf, `jnp.exp(self.log_scale)`,
    any expression of leaves; a field of another form, such as a term added, is refused naming
    it); for any
    other tree, the one leaf outside the network whose field name contains "scale" and that is
    a scalar or of shape (1,) or (N,) (diffrax's neural ODE example: `Func` with fields
    `out_scale` and `mlp`), and no scale where there is none; pass out_scale=1.0 for none.
    Raises ValueError when there is no MLP, more than one, more than one scale candidate, or an
    unsupported activation, saying what was found."""
    k = _num_inputs(inputs)
    if time_input is not None:
        time_input = _args.boolean(time_input, "time_input")
    if time_input is None:
        layers = _equinox_parts(module, False)[0]
        time_input = int(layers[0][0].shape[1]) == int(layers[-1][0].shape[0]) + 1 + k
    layers, act, fact, ti, _ = _equinox_parts(module, time_input)
    ws = [np.asarray(w, dtype=np.float64) for w, _ in layers]
    bs = [None if b is None else np.asarray(b, dtype=np.float64) for _, b in layers]
    if out_scale is None:
        n = int(ws[-1].shape[0])
        found = _field_factor(module, n, k, ti, np.dtype(getattr(layers[-1][0], "dtype",
                                                                  np.float64)))
        if found is None:
            found = _equinox_scale(module, n)
        elif np.all(found == 1.0):  # a factor of 1: a scale leaf at 1 is kept (a parameter)
            found = found if len(_find_scale(module, n, _is_net)) == 1 else None
        out_scale = None if found is None else np.asarray(found, dtype=np.float64)
    return MLP(ws, bs, activation=act, final_activation=fact, time_input=ti, inputs=k,
               out_scale=out_scale)


# ------------------------------------------------------------------------------------------------
# PyTorch (torch itself is never imported: modules are recognised by their class names)

_TORCH_ACTS = {"Tanh": "tanh", "ReLU": "relu", "Sigmoid": "sigmoid", "SiLU": "silu",
               "Identity": "identity", "Softplus": "softplus", "GELU": "gelu"}


def _to_numpy(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(getattr(x, "dtype", "")) in ("torch.bfloat16", "torch.float16"):
            x = x.float()
        x = x.numpy()
    return np.asarray(x, dtype=np.float64)


def _torch_activation(m):
    cls = type(m).__name__
    name = _TORCH_ACTS.get(cls)
    if name == "softplus" and (getattr(m, "beta", 1) != 1):
        raise ValueError(f"Softplus(beta={m.beta}) is not supported (clnode's softplus has "
                         "beta=1)")
    if name == "gelu" and getattr(m, "approximate", "none") != "tanh":
        raise ValueError("GELU(approximate='none') is not supported: clnode's gelu is the tanh "
                         "approximation; use nn.GELU(approximate='tanh')")
    return name


def _from_torch_sequential(seq, time_input, inputs=0, out_scale=None):
    # every item in order: an nn.Sequential iterates its items, each occurrence of a module it
    # reuses included ([Linear, act, Linear, act]), where Module.children() lists a module once
    if hasattr(seq, "__iter__"):
        mods = [m for m in seq if m is not None]
    else:
        mods = list(seq.children())
    layers: List[Tuple[np.ndarray, Optional[np.ndarray]]] = []
    acts: List[str] = []
    for m in mods:
        cls = type(m).__name__
        if cls == "Linear":
            if layers and len(acts) < len(layers):
                acts.append("identity")
            layers.append((_to_numpy(m.weight), None if m.bias is None else _to_numpy(m.bias)))
        elif cls in _TORCH_ACTS:
            if not layers or len(acts) >= len(layers):
                raise ValueError(f"nn.Sequential: {cls} does not follow a Linear layer; clnode "
                                 "supports Linear, activation, Linear, ...")
            acts.append(_torch_activation(m))
        else:
            raise ValueError(f"nn.Sequential contains {cls}: clnode supports Linear layers with "
                             "Tanh, Softplus, ReLU, Sigmoid, SiLU, GELU(approximate='tanh') or "
                             "Identity between them")
    if not layers:
        raise ValueError("nn.Sequential without a Linear layer")
    final = acts[len(layers) - 1] if len(acts) >= len(layers) else "identity"
    inner = set(acts[:len(layers) - 1]) or {"identity"}
    if len(inner) > 1:
        raise ValueError(f"different activations between layers ({sorted(inner)}); clnode uses "
                         "one activation between all layers")
    ws = [w for w, _ in layers]
    bs = [b for _, b in layers]
    if time_input is None:
        time_input = ws[0].shape[1] == ws[-1].shape[0] + 1 + inputs
    return MLP(ws, bs, activation=inner.pop(), final_activation=final, time_input=time_input,
               inputs=inputs, out_scale=out_scale)


def _torch_scale(named, where):
    """The one output scale among (name, value) pairs: those whose last name part contains
    "scale", as a float64 array; None where there is none."""
    found = [(n, v) for n, v in named if "scale" in str(n).split(".")[-1].lower()]
    if len(found) > 1:
        raise ValueError(f"{where}: more than one output scale ({', '.join(n for n, _ in found)})"
                         ": clnode takes one")
    return (None, None) if not found else (found[0][0], _to_numpy(found[0][1]))


def _from_torch_module(model, time_input, inputs):
    """A custom module holding one nn.Sequential and, beside it, at most one parameter named
    like "*scale" (the output scale)."""
    kids = list(model.named_children()) if hasattr(model, "named_children") else \
        [(k, v) for k, v in vars(model).items() if hasattr(v, "children")]
    params = list(model.named_parameters(recurse=False)) if hasattr(model, "named_parameters") \
        else [(k, v) for k, v in vars(model).items() if hasattr(v, "shape")]
    seqs = [(n, c) for n, c in kids if type(c).__name__ == "Sequential"]
    if len(seqs) != 1:
        raise ValueError(f"from_torch takes an nn.Sequential, a state_dict, or a module holding "
                         f"one nn.Sequential (and optionally an output scale parameter named like "
                         f"'out_scale'); {type(model).__name__} holds {len(seqs)} Sequential "
                         "modules (pass the one you mean, or model.state_dict() with activation=)")
    name, scale = _torch_scale(params, type(model).__name__)
    return _from_torch_sequential(seqs[0][1], time_input, inputs, scale)


def _from_state_dict(sd, activation, final_activation, time_input, inputs=0):
    entries = {}
    prefixes = set()
    scale_name, scale = _torch_scale(sd.items(), "state_dict")
    for key, value in sd.items():
        if key == scale_name:
            continue
        parts = str(key).split(".")
        if len(parts) < 2 or parts[-1] not in ("weight", "bias") or not parts[-2].isdigit():
            raise ValueError(f"state_dict entry {key!r}: clnode reads '<prefix><i>.weight' and "
                             "'<prefix><i>.bias' of Linear layers only (e.g. 'net.0.weight', "
                             "'layers.1.bias')")
        prefixes.add(".".join(parts[:-2]))
        entries[(int(parts[-2]), parts[-1])] = _to_numpy(value)
    if not entries:
        raise ValueError("empty state_dict")
    if len(prefixes) > 1:
        raise ValueError(f"state_dict entries under different prefixes {sorted(prefixes)}: pass "
                         "the state_dict of one network")
    if activation is None:
        raise ValueError("a state_dict does not say its activation: pass activation= (one of "
                         + ", ".join(ACTIVATIONS) + ")")
    idx = sorted({i for i, _ in entries})
    ws, bs = [], []
    for i in idx:
        if (i, "weight") not in entries:
            raise ValueError(f"state_dict: layer {i} has a bias but no weight")
        ws.append(entries[(i, "weight")])
        bs.append(entries.get((i, "bias")))
    if time_input is None:
        time_input = ws[0].shape[1] == ws[-1].shape[0] + 1 + inputs
    return MLP(ws, bs, activation=activation, final_activation=final_activation,
               time_input=time_input, inputs=inputs, out_scale=scale)


def from_torch(model: Any, *, activation: Optional[str] = None,
               final_activation: str = "identity", time_input: Optional[bool] = None,
               inputs: int = 0) -> MLP:
    """An MLP from PyTorch: an `nn.Sequential` of `nn.Linear` layers with one activation module
    between them (Tanh, Softplus, ReLU, Sigmoid, SiLU, GELU(approximate="tanh"), Identity) and
    optionally one after the last (one module object may stand at several places), or a
    state_dict of such a network (torch tensors or numpy arrays; "<prefix><i>.weight" /
    "<prefix><i>.bias", any common prefix such as "net." or "func.mlp.layers." stripped), which
    needs `activation` (and `final_activation`, default identity) since a state_dict does not
    record them. `inputs`: the number of conditioning inputs k (the first layer takes [y, c] or
    [y, t, c]), as from_equinox. The output scale of a field `out_scale * net(y)`: a state_dict
    entry, or a parameter of a module holding one nn.Sequential beside it, whose name ends in a
    part containing "scale" (e.g. "out_scale", "func.scale"), of shape (), (1,) or (N,). torch
    is not needed to call this.
    Raises ValueError for anything else, saying what was found and what is supported."""
    if hasattr(model, "items") and not hasattr(model, "children"):
        return _from_state_dict(model, activation, final_activation, time_input,
                                _num_inputs(inputs))
    if type(model).__name__ == "Sequential" or isinstance(model, (list, tuple)):
        if activation is not None:
            raise ValueError("activation= is for state_dicts; a Sequential has its own")
        return _from_torch_sequential(model, time_input, _num_inputs(inputs))
    if hasattr(model, "named_children") or hasattr(model, "children"):
        if activation is not None:
            raise ValueError("activation= is for state_dicts; a module's Sequential has its own")
        return _from_torch_module(model, time_input, _num_inputs(inputs))
    raise ValueError(f"from_torch takes an nn.Sequential or a state_dict, not "
                     f"{type(model).__name__} (for a custom nn.Module, pass its Sequential "
                     "attribute or model.state_dict() with activation=)")
