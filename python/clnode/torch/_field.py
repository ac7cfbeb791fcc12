"""A PyTorch vector field recognised from its graph (torch.fx), never from its values.

The field is an nn.Module called as func(t, y) (torchdiffeq) or f(t, y) / f(t, y, args)
(torchode). Its forward is traced symbolically (torch.fx.symbolic_trace: nn.Linear and the
activation modules stay calls of those modules, nn.Sequential and custom modules are traced
through), and the graph is taken only when it is exactly

    out = net(x)     or    out = s * net(x)   (or net(x) * s)
    x   = y | cat([y, T], -1) | cat([y, A], -1) | cat([y, T, A], -1)

with net a chain of nn.Linear modules and activation modules (one kind between the layers, and
optionally one after the last), T the time t made a column (t.expand(...), t.reshape(...),
t[:, None], t.unsqueeze(-1), ... with shapes read from y), A the conditioning inputs args, and s
a parameter (or buffer) of the module of shape (), (1,) or (N,). The activations are matched with
their arguments: Tanh, ReLU, Sigmoid, SiLU, Identity, Softplus(beta=1.0, threshold=20.0),
GELU(approximate="tanh"). Anything else is refused with a Refusal naming the module or the
operation and where it is (the node's name in the graph)."""
import dataclasses
import inspect
import operator
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx
from torch import nn


class Refusal(ValueError):
    """A vector field, method or option clnode.torch does not solve, with the reason."""


# nn activation modules: their class, the library's name, and the arguments it takes exactly
_ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.SiLU: "silu",
                nn.Identity: "identity", nn.Softplus: "softplus", nn.GELU: "gelu"}
# the arguments of those the recognition reads (_activation)
_ARGUMENTS = {nn.Softplus: ("beta", "threshold"), nn.GELU: ("approximate",)}
SUPPORTED = ("Linear, Tanh, ReLU, Sigmoid, SiLU, Identity, Softplus(beta=1.0, threshold=20.0), "
             "GELU(approximate='tanh')")


def _activation(mod: Any, where: str) -> Optional[str]:
    """The library's name of an activation module, or None for a module that is none; a Refusal
    for a supported kind with arguments the library does not compute."""
    name = _ACTIVATIONS.get(type(mod))
    if name == "softplus" and (float(mod.beta) != 1.0 or float(mod.threshold) != 20.0):
        raise Refusal(f"{where}: Softplus(beta={mod.beta}, threshold={mod.threshold}): clnode's "
                      "softplus is Softplus(beta=1.0, threshold=20.0)'s (log(1 + exp(x)))")
    if name == "gelu" and mod.approximate != "tanh":
        raise Refusal(f"{where}: GELU(approximate={mod.approximate!r}): clnode's gelu is the "
                      "tanh approximation, nn.GELU(approximate='tanh')")
    return name


@dataclasses.dataclass(frozen=True)
class Field:
    """A recognised field: the paths of its Linear modules (in order), the activation between
    them and after the last, whether the network takes t and how many conditioning inputs, and
    the path of its output scale (None: none)."""
    linears: Tuple[str, ...]
    activation: str
    final_activation: str
    time_input: bool
    inputs: int
    scale: Optional[str]
    dim: int

    def parameters(self, module: nn.Module) -> List[Tuple[str, Any]]:
        """(state_dict name, tensor) of every parameter the library reads, in its order: each
        layer's weight then its bias (if any), then the output scale (if any)."""
        out = []
        for path in self.linears:
            lin = module.get_submodule(path)
            out.append((_join(path, "weight"), lin.weight))
            if lin.bias is not None:
                out.append((_join(path, "bias"), lin.bias))
        if self.scale is not None:
            out.append((self.scale, attribute(module, self.scale)))
        return out

    def has_bias(self, module: nn.Module) -> Tuple[bool, ...]:
        return tuple(module.get_submodule(p).bias is not None for p in self.linears)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def attribute(module: nn.Module, path: str) -> Any:
    """The module's attribute at a dotted path ("net.0.weight")."""
    obj: Any = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


_CACHE: "weakref.WeakKeyDictionary[nn.Module, Tuple[Any, Field, Dict[Any, Any]]]" = \
    weakref.WeakKeyDictionary()


def _fingerprint(module: nn.Module, n_args: int) -> Any:
    """What the recognition and the parameters' list depend on besides the forward's code: the
    module tree (which modules where, with the activations' arguments, whether each Linear has
    a bias, and their forward hooks) and a forward set on the module itself. Only the arguments
    the recognition reads are read (getattr on nn.Module of a name it lacks raises and catches
    an AttributeError: more than the rest of the check costs)."""
    out = []
    for name, m in module.named_modules():
        kind = type(m)
        args = tuple(getattr(m, a) for a in _ARGUMENTS.get(kind, ()))
        if isinstance(m, nn.Linear):
            args = (m.bias is None,)
        out.append((name, kind, args, len(m._forward_hooks) + len(m._forward_pre_hooks)))
    return (n_args, type(module).forward, module.__dict__.get("forward"), tuple(out))


def recognise(func: Any, n_args: int, dim: int, k: int) -> Field:
    """The Field of `func` called with n_args arguments (2: (t, y), 3: (t, y, args)) on states of
    `dim` values with `k` conditioning inputs; a Refusal naming what is not supported."""
    return recognise_memo(func, n_args, dim, k)[0]


def recognise_memo(func: Any, n_args: int, dim: int, k: int) -> Tuple[Field, Dict[Any, Any]]:
    """recognise's Field, and a dict kept with it for the caller's own results of it (emptied
    whenever the module is recognised again: its tree changed)."""
    if not isinstance(func, nn.Module):
        name = getattr(func, "__qualname__", type(func).__name__)
        # a plain function is traced too, to name what it computes; then refused
        try:
            graph = torch.fx.symbolic_trace(func).graph
        except Exception:  # noqa: BLE001 - any tracing failure: refused as a function
            graph = None
        what = ""
        if graph is not None:
            ops = [_describe(n) for n in graph.nodes if n.op not in ("placeholder", "output")]
            what = f" (it computes {', '.join(ops[:4]) or 'nothing'})"
        raise Refusal(f"the vector field {name} is a function{what}: clnode.torch solves an "
                      "nn.Module whose forward is net(y), net(cat([y, t...])) or "
                      f"net(cat([y, args])), optionally times a learnt scale, net a chain of "
                      f"{SUPPORTED}")
    key = (_fingerprint(func, n_args), dim, k)
    hit = _CACHE.get(func)
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    field = _recognise(func, n_args, dim, k)
    memo: Dict[Any, Any] = {}
    _CACHE[func] = (key, field, memo)
    return field, memo


class _Tracer(torch.fx.Tracer):
    """torch.fx's tracer, a parameter of the module read as that parameter (a get_attr of its
    path) also where it is a plain tensor: under torch.func.functional_call (a
    reparametrization) the module's parameters are the caller's tensors, which fx would take as
    constants (an attribute _tensor_constant<i> set on the module, holding that call's value,
    read by every later solve)."""

    def create_arg(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor) and not isinstance(a, nn.Parameter):
            for name, p in self.root.named_parameters():
                if a is p:
                    return self.create_node("get_attr", name, (), {})
        return super().create_arg(a)


def _trace(module: nn.Module, n_args: int) -> torch.fx.Graph:
    params = list(inspect.signature(module.forward).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < n_args:
        raise Refusal(f"{type(module).__name__}.forward takes {len(positional)} arguments; the "
                      f"solver calls it with {n_args} (t, y" + (", args)" if n_args == 3 else ")"))
    concrete = {p.name: p.default for p in positional[n_args:]}
    missing = [n for n, v in concrete.items() if v is inspect.Parameter.empty]
    if missing:
        raise Refusal(f"{type(module).__name__}.forward has arguments {missing} the solver does "
                      "not pass")
    try:
        tracer = _Tracer()
        graph = tracer.trace(module, concrete_args=concrete or None)
        return torch.fx.GraphModule(tracer.root, graph).graph
    except Exception as e:  # noqa: BLE001 - a forward fx cannot trace (control flow on values)
        raise Refusal(f"{type(module).__name__}.forward cannot be traced by torch.fx ({e}); "
                      "clnode.torch reads the field from its graph") from None


def _describe(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        owner = node.graph.owning_module
        if owner is None:
            return str(node.target)
        return f"{node.target} ({type(owner.get_submodule(str(node.target))).__name__})"
    if node.op in ("call_function", "call_method"):
        target = node.target if isinstance(node.target, str) else getattr(
            node.target, "__name__", str(node.target))
        consts = [a for a in node.args if isinstance(a, (int, float))]
        return f"{target}" + (f" by {consts[0]}" if consts and target in ("mul", "add", "pow",
                                                                          "sub") else "")
    if node.op == "get_attr":
        return f"the attribute {node.target}"
    return f"{node.op} {node.target}"


_SHAPE_OPS = {"expand", "reshape", "view", "unsqueeze", "broadcast_to", "repeat", "expand_as",
              "to", "type_as", "float", "double", "contiguous", "view_as", "reshape_as"}
_SHAPE_FUNCS = {torch.reshape, torch.unsqueeze, torch.broadcast_to, torch.atleast_1d,
                torch.atleast_2d}


def _is_shape_value(a: Any, y: torch.fx.Node) -> bool:
    """Whether an argument of a reshape is a shape: ints, y.shape, y.size(), items of them, or
    a dtype/device."""
    if isinstance(a, (int, torch.dtype, torch.device, str, type(None), slice, type(Ellipsis))):
        return True
    if isinstance(a, (tuple, list)):
        return all(_is_shape_value(x, y) for x in a)
    if isinstance(a, torch.fx.Node):
        if a.op == "call_function" and a.target in (getattr, operator.getitem):
            base = a.args[0]
            if a.target is getattr and a.args[1] == "shape":
                return _is_tensor_like_of(base, y)
            return _is_shape_value(base, y) and all(_is_shape_value(x, y) for x in a.args[1:])
        if a.op == "call_method" and a.target in ("size", "dim"):
            return _is_tensor_like_of(a.args[0], y)
        if a.op == "call_function" and a.target is len:
            return _is_shape_value(a.args[0], y)
    return False


def _is_tensor_like_of(a: Any, y: torch.fx.Node) -> bool:
    # the shape of y (or of the time) only
    return isinstance(a, torch.fx.Node) and a.op == "placeholder"


def _time_column(node: Any, t: torch.fx.Node, y: torch.fx.Node) -> bool:
    """Whether `node` is the time t made a column by reshapes alone."""
    while isinstance(node, torch.fx.Node) and node is not t:
        if node.op == "call_method" and node.target in _SHAPE_OPS:
            rest = list(node.args[1:]) + list(node.kwargs.values())
            if node.target in ("expand_as", "view_as", "reshape_as", "type_as"):
                rest = [a for a in rest if not _is_tensor_like_of(a, y)]
        elif node.op == "call_function" and (node.target in _SHAPE_FUNCS
                                             or node.target is operator.getitem):
            rest = list(node.args[1:]) + list(node.kwargs.values())
        else:
            return False
        if not all(_is_shape_value(a, y) for a in rest):
            return False
        node = node.args[0]
    return node is t


def _cat_parts(node: Any) -> Optional[List[Any]]:
    """The list of a torch.cat along the last axis (dim -1, or 1 for the 2-d batch), or None."""
    if node.op != "call_function" or node.target not in (torch.cat, torch.concat,
                                                         torch.concatenate):
        return None
    parts: Any = node.args[0] if node.args else node.kwargs.get("tensors")
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", node.kwargs.get(
        "axis", 0))
    if dim not in (-1, 1):
        raise Refusal(f"the field concatenates along dim={dim} ({node.name}); clnode takes "
                      "torch.cat([y, ...], dim=-1)")
    return list(parts)


def _recognise(module: nn.Module, n_args: int, dim: int, k: int) -> Field:
    if "forward" in module.__dict__:
        raise Refusal(f"{type(module).__name__}: a forward set on the module itself (torch.fx "
                      "traces its class's forward, which calling the module would not run)")
    for name, m in module.named_modules():
        if m._forward_hooks or m._forward_pre_hooks:
            raise Refusal(f"{type(module).__name__}: the module {name or '(root)'} "
                          f"({type(m).__name__}) has forward hooks, which torch.fx does not "
                          "trace: clnode would solve the field without them")
    graph = _trace(module, n_args)
    owner = type(module).__name__
    ph = [n for n in graph.nodes if n.op == "placeholder"]
    t, y = ph[0], ph[1]
    a = ph[2] if n_args == 3 and len(ph) > 2 else None
    out = next(n for n in graph.nodes if n.op == "output").args[0]
    if not isinstance(out, torch.fx.Node):
        raise Refusal(f"{owner}.forward returns {type(out).__name__}, not one tensor")
    # the output scale: s * net(x) or net(x) * s, s a parameter or buffer
    scale = None
    node: Any = out
    if node.op in ("call_function", "call_method") and node.target in (operator.mul, torch.mul,
                                                                        "mul"):
        x0, x1 = node.args[0], node.args[1]
        if isinstance(x0, torch.fx.Node) and x0.op == "get_attr":
            scale, node = x0, x1
        elif isinstance(x1, torch.fx.Node) and x1.op == "get_attr":
            scale, node = x1, x0
    # the network: a chain of call_module nodes of Linear and activations
    chain: List[Tuple[str, nn.Module]] = []
    while isinstance(node, torch.fx.Node) and node.op == "call_module":
        mod = module.get_submodule(str(node.target))
        if len(node.args) != 1 or node.kwargs:
            raise Refusal(f"{owner}: the module {node.target} ({type(mod).__name__}) is called "
                          "with more than one argument")
        chain.append((str(node.target), mod))
        node = node.args[0]
    chain.reverse()
    if not chain:
        raise Refusal(f"{owner}: the field's output is {_describe(out)} ({out.name}), not a "
                      f"network of {SUPPORTED}" + _unsupported(graph, module))
    # what feeds the network
    x = node
    time_input, inputs = False, 0
    if x is not y:
        parts = _cat_parts(x) if isinstance(x, torch.fx.Node) else None
        if parts is None or not parts or parts[0] is not y:
            what = _describe(x) if isinstance(x, torch.fx.Node) else repr(x)
            raise Refusal(f"{owner}: the network's input is {what} ({getattr(x, 'name', x)}), "
                          "not y, cat([y, t], -1), cat([y, args], -1) or cat([y, t, args], -1)"
                          + _unsupported(graph, module))
        rest = parts[1:]
        if rest and _time_column(rest[0], t, y):
            time_input, rest = True, rest[1:]
        if rest and a is not None and rest[0] is a:
            inputs, rest = k, rest[1:]
        if rest:
            r = rest[0]
            raise Refusal(f"{owner}: the network's input concatenates "
                          f"{_describe(r) if isinstance(r, torch.fx.Node) else repr(r)} "
                          "after y; clnode takes t as a column (t.expand(...), t[:, None], ...) "
                          "then args")
    # every node of the graph must be one of those read
    used = _ancestors(out)
    for n in graph.nodes:
        if n.op in ("placeholder", "output") or n in used or _is_concrete_check(n):
            continue
        raise Refusal(f"{owner}: the field computes {_describe(n)} ({n.name}) besides its "
                      "network")
    layers = [(p, m) for p, m in chain if isinstance(m, nn.Linear)]
    if not layers or not isinstance(chain[0][1], nn.Linear):
        raise Refusal(f"{owner}: the network must start with an nn.Linear, not "
                      f"{type(chain[0][1]).__name__} ({chain[0][0]})")
    inner: List[str] = []
    final = "identity"
    for i, (path, mod) in enumerate(chain):
        if isinstance(mod, nn.Linear):
            if i and isinstance(chain[i - 1][1], nn.Linear):
                inner.append("identity")
            continue
        name = _activation(mod, f"{owner}: {path}")
        if name is None:
            raise Refusal(f"{owner}: the network has {type(mod).__name__} ({path}); clnode "
                          f"takes {SUPPORTED}")
        if i and not isinstance(chain[i - 1][1], nn.Linear):
            raise Refusal(f"{owner}: two activations in a row ({chain[i - 1][0]}, {path}); "
                          "clnode takes Linear, activation, Linear, ...")
        if i == len(chain) - 1:
            final = name
        else:
            inner.append(name)
    acts = sorted(set(inner)) or ["identity"]
    if len(acts) > 1:
        raise Refusal(f"{owner}: different activations between layers ({acts}); clnode uses one")
    widths_in = [m.in_features for _, m in layers]
    widths_out = [m.out_features for _, m in layers]
    for i in range(1, len(layers)):
        if widths_in[i] != widths_out[i - 1]:
            raise Refusal(f"{owner}: {layers[i][0]} takes {widths_in[i]} values after "
                          f"{widths_out[i - 1]}")
    want_in = dim + int(time_input) + inputs
    if widths_in[0] != want_in or widths_out[-1] != dim:
        raise Refusal(f"{owner}: the network maps {widths_in[0]} to {widths_out[-1]} values; "
                      f"the state has {dim} values" + (" and t" if time_input else "")
                      + (f" and {inputs} inputs" if inputs else "") + f" ({want_in} in)")
    scale_path = None
    if scale is not None:
        scale_path = str(scale.target)
        s = attribute(module, scale_path)
        if not isinstance(s, torch.Tensor) or tuple(s.shape) not in ((), (1,), (dim,)):
            raise Refusal(f"{owner}: the output scale {scale_path} must be a tensor of shape (), "
                          f"(1,) or ({dim},)")
    return Field(tuple(p for p, _ in layers), acts[0], final, time_input, inputs, scale_path,
                 dim)


def _is_concrete_check(n: torch.fx.Node) -> bool:
    """fx's check that an argument fixed by concrete_args (args=None) is what it was fixed to."""
    return n.op == "call_function" and getattr(n.target, "__name__", "") == "_assert_is_none"


def _ancestors(node: torch.fx.Node) -> set:
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def _unsupported(graph: torch.fx.Graph, module: nn.Module) -> str:
    """The operations of the graph outside what clnode takes, named (for the refusal)."""
    bad = []
    for n in graph.nodes:
        if n.op == "call_module":
            m = module.get_submodule(str(n.target))
            if isinstance(m, nn.Linear) or type(m) in _ACTIVATIONS:
                continue
        elif n.op in ("placeholder", "output", "get_attr"):
            continue
        elif n.op == "call_function" and n.target in (torch.cat, getattr, operator.getitem):
            continue
        bad.append(f"{_describe(n)} ({n.name})")
    return f"; it computes {', '.join(bad[:4])}" if bad else ""
