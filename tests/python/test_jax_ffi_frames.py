"""clnode's XLA handlers (python/clnode/_clnode_xla.c) driven without XLA, by synthetic call
frames built with ctypes from the FFI's documented layout: the metadata query (the API version
they need, no traits), a metadata struct too small, the checks of the frame, the plan attribute
and the operands (count, dtype, shape) with their messages and XLA's codes, a library error
with the library's message first, a whole forward solve against clnode.solve's bits, with the
controller's numbers from the operand ctrl, and a whole reverse pass (from the forward's tape,
and re-solved on a miss) against Solution.vjp's bits, with its own errors: a token, a cotangent
of another shape or dtype, a non-finite cotangent."""
import ctypes as C

import numpy as np
import pytest

pytest.importorskip("jax")

import clnode  # noqa: E402
from clnode import _clnode, _solve  # noqa: E402
from clnode.jax import _ffi  # noqa: E402

XLA = _clnode._xla()
INVALID_ARGUMENT = 3
F64, F32, S32, S64 = 12, 11, 4, 5


class Ext(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("type", C.c_int), ("next", C.c_void_p)]


class ApiVersion(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("major", C.c_int), ("minor", C.c_int)]


class Metadata(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("api_version", ApiVersion),
                ("traits", C.c_uint32)]


class MetadataExt(C.Structure):
    _fields_ = [("base", Ext), ("metadata", C.POINTER(Metadata))]


class ErrorArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("message", C.c_char_p), ("errc", C.c_int)]


ERROR_CREATE = C.CFUNCTYPE(C.c_void_p, C.POINTER(ErrorArgs))


class Api(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("api_version", ApiVersion), ("internal_api", C.c_void_p),
                ("error_create", ERROR_CREATE)] + [(n, C.c_void_p) for n in (
                    "get_message", "destroy", "register", "stream_get")]


class Buffer(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("dtype", C.c_int), ("data", C.c_void_p), ("rank", C.c_int64),
                ("dims", C.POINTER(C.c_int64))]


class Span(C.Structure):
    _fields_ = [("ptr", C.c_char_p), ("len", C.c_size_t)]


class Scalar(C.Structure):
    _fields_ = [("dtype", C.c_int), ("value", C.c_void_p)]


def _list(n):
    return [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("size", C.c_int64),
            ("types", C.POINTER(C.c_int))] + n


class Args(C.Structure):
    _fields_ = _list([("args", C.POINTER(C.c_void_p))])


class Attrs(C.Structure):
    _fields_ = _list([("names", C.POINTER(C.POINTER(Span))), ("attrs", C.POINTER(C.c_void_p))])


class Frame(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("api", C.POINTER(Api)), ("ctx", C.c_void_p), ("stage", C.c_int),
                ("args", Args), ("rets", Args), ("attrs", Attrs), ("future", C.c_void_p)]


HANDLER = C.CFUNCTYPE(C.c_void_p, C.POINTER(Frame))
_get = C.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]


def handler(name):
    return HANDLER(_get(XLA[name], None))


class Call:
    """One synthetic frame: arrays as buffers, int64 attributes; the errors XLA would get."""

    def __init__(self):
        self.errors = []
        self.keep = []

        def create(args):
            self.errors.append((args.contents.errc, args.contents.message.decode()))
            return 1  # any non-NULL pointer: the handler returns it to XLA
        self.cb = ERROR_CREATE(create)
        self.api = Api(struct_size=C.sizeof(Api), error_create=self.cb)

    def buffer(self, a, dtype=None):
        a = np.ascontiguousarray(a)
        code = dtype or {np.dtype(np.float64): F64, np.dtype(np.float32): F32,
                         np.dtype(np.int32): S32}[a.dtype]
        dims = (C.c_int64 * max(a.ndim, 1))(*a.shape)
        b = Buffer(struct_size=C.sizeof(Buffer), dtype=code, data=a.ctypes.data, rank=a.ndim,
                   dims=dims)
        self.keep += [a, dims, b]
        return C.cast(C.pointer(b), C.c_void_p)

    def frame(self, args, rets, attrs, ext=None):
        def lst(cls, items, types):
            arr = (C.c_void_p * max(len(items), 1))(*items)
            ty = (C.c_int * max(len(items), 1))(*types)
            self.keep += [arr, ty]
            return cls(struct_size=C.sizeof(cls), size=len(items), types=ty,
                       **{"args": arr} if cls is Args else {})
        a = lst(Args, [self.buffer(x) for x in args], [1] * len(args))
        r = lst(Args, [self.buffer(x) for x in rets], [1] * len(rets))
        names, values = [], []
        for k, v in sorted(attrs.items()):
            s = Span(k.encode(), len(k))
            val = C.c_int64(v)
            sc = Scalar(S64, C.cast(C.pointer(val), C.c_void_p))
            self.keep += [s, val, sc]
            names.append(C.pointer(s))
            values.append(C.cast(C.pointer(sc), C.c_void_p))
        n = max(len(names), 1)
        at = Attrs(struct_size=C.sizeof(Attrs), size=len(names),
                   types=(C.c_int * n)(*[3] * len(names)),
                   names=(C.POINTER(Span) * n)(*names), attrs=(C.c_void_p * n)(*values))
        self.keep.append(at)
        f = Frame(struct_size=C.sizeof(Frame), extension_start=ext, api=C.pointer(self.api),
                  stage=3, args=a, rets=r, attrs=at)
        self.keep.append(f)
        return f


def plan(n=2, T=1, f64=True, max_steps=64, ctrl=(), device="host"):
    opts = _solve._table_options(dict(method="tsit5", max_steps=max_steps,
                                      precision="fp64" if f64 else "fp32", rtol=1e-6,
                                      atol=1e-8, constant_step=False))
    opts.update(save_t0=False, save_t1=True, save_steps=False)
    return XLA["plan"](_ffi._texts(opts), device, (n, 8, n), (True, False), "tanh", "identity", False, 0, 0,
                       T, f64, f64, False, False, False, True, 1, ctrl)


def operands(y0, t1=1.0, n_params=None, dtype=np.float64):
    rng = np.random.default_rng(3)
    params = rng.standard_normal(n_params or (8 * 2 + 8 + 2 * 8)).astype(dtype)
    z = np.zeros(0, dtype)
    return [np.asarray(y0, dtype), np.asarray(0.0, dtype), np.asarray(t1, dtype),
            np.asarray(0.1, dtype), z, z, z, params, np.zeros(0)]


def results(B, T=1, n=2, dtype=np.float64):
    return [np.zeros((B, T), dtype), np.zeros((B, T, n), dtype), np.zeros((B, 4), np.int32),
            np.zeros((B,), np.int32)]


def check_metadata_answer(get_handler):
    """get_handler's fwd, vjp and jvp answer the metadata query: API 0.1, no traits. Returns the
    call, its metadata and the frame's extension."""
    c = Call()
    md = Metadata(struct_size=C.sizeof(Metadata))
    ext = MetadataExt(Ext(C.sizeof(MetadataExt), 1, None), C.pointer(md))
    for name in ("fwd", "vjp", "jvp"):
        md.api_version.major = md.api_version.minor = -1
        md.traits = 7
        f = c.frame([], [], {}, ext=C.cast(C.pointer(ext), C.c_void_p))
        assert get_handler(name)(C.pointer(f)) is None
        assert (md.api_version.major, md.api_version.minor) == tuple(XLA["api"]) == (0, 1)
        assert md.traits == 0 and c.errors == []
    return c, md, ext


def test_metadata_query_answers_the_version_it_needs():
    c, md, ext = check_metadata_answer(handler)
    md.struct_size = 8  # too small to hold what is answered
    f = c.frame([], [], {}, ext=C.cast(C.pointer(ext), C.c_void_p))
    assert handler("fwd")(C.pointer(f)) is not None
    assert c.errors[-1][0] == INVALID_ARGUMENT and "metadata" in c.errors[-1][1]


def test_frame_attributes_and_operands_are_checked_by_name():
    c = Call()
    h = plan()
    fwd = handler("fwd")
    cases = [
        (operands([[0.5, -0.2]])[:3], results(1), {"plan": h}, "takes 9 operands"),
        (operands([[0.5, -0.2]]), results(1), {}, "no plan 0"),
        (operands([[0.5, -0.2]]), results(1), {"plan": 10 ** 9}, "no plan 1000000000"),
        (operands([[0.5, -0.2]], dtype=np.float32), results(1), {"plan": h},
         "operand y0 has dtype float32, not float64"),
        (operands([[0.5, -0.2, 0.1]]), results(1), {"plan": h},
         "operand y0 has 3 values along its axis 1, not 2"),
        (operands([[0.5, -0.2]], n_params=5), results(1), {"plan": h},
         "operand params has 5 values along its axis 0, not 40"),
        (operands(np.zeros((3, 2))), results(2), {"plan": h},
         "operand y0 has 3 along leading axis 0, where the batch has 2"),
        (operands([[np.nan, -0.2]]), results(1), {"plan": h}, "y0"),  # the library's
    ]
    for args, rets, attrs, msg in cases:
        c.errors.clear()
        assert fwd(C.pointer(c.frame(args, rets, attrs))) is not None, msg
        (code, text), = c.errors
        assert code == INVALID_ARGUMENT and msg in text, (msg, text)
        assert text.endswith("in clnode.jax.diffeqsolve)"), text
    # the library's own message first, then the exception clnode.solve raises
    assert "clnode.InvalidArgumentError" in text and text.index("y0") < text.index("clnode.")


def test_a_forward_frame_gives_clnode_solves_bits():
    c = Call()
    h = plan()
    y0 = np.array([[0.5, -0.2], [0.1, 0.3], [-1.0, 0.7]])
    args = operands(y0)
    rets = results(3)
    assert handler("fwd")(C.pointer(c.frame(args, rets, {"plan": h, "keep": 0}))) is None
    p = args[7]
    m = clnode.MLP([p[:16].reshape(8, 2), p[24:].reshape(2, 8)], [p[16:24], None],
                   activation="tanh")
    sol = clnode.solve(m, y0, t0=0.0, t1=1.0, dt0=0.1, method="tsit5", max_steps=64,
                       precision="fp64", rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(rets[1], sol.ys)
    np.testing.assert_array_equal(rets[0], sol.ts)
    np.testing.assert_array_equal(rets[2][:, 0], sol.stats["num_steps"])
    assert np.all(rets[2][:, 3] == 0) and np.all(rets[3] == 0)
    # max_steps reached: diffrax's code 1, no error (throw is diffeqsolve's, in JAX)
    short = results(3)
    h2 = plan(max_steps=2)
    assert handler("fwd")(C.pointer(c.frame(args, short, {"plan": h2}))) is None
    assert np.all(short[2][:, 3] == 1) and c.errors == []


def model_of(p):
    return clnode.MLP([p[:16].reshape(8, 2), p[24:].reshape(2, 8)], [p[16:24], None],
                      activation="tanh")


def test_a_forward_frame_takes_the_controllers_numbers_from_its_operand():
    c = Call()
    h = plan(ctrl=("rtol", "pcoeff"))
    y0 = np.array([[0.5, -0.2], [0.1, 0.3]])
    for rtol, pcoeff in ((1e-3, 0.0), (1e-9, 0.3)):
        args = operands(y0)
        args[8] = np.array([rtol, pcoeff])
        rets = results(2)
        assert handler("fwd")(C.pointer(c.frame(args, rets, {"plan": h}))) is None, c.errors
        sol = clnode.solve(model_of(args[7]), y0, t0=0.0, t1=1.0, dt0=0.1, method="tsit5",
                           max_steps=64, precision="fp64", rtol=rtol, atol=1e-8, pcoeff=pcoeff)
        np.testing.assert_array_equal(rets[1], sol.ys)
        np.testing.assert_array_equal(rets[2][:, 0], sol.stats["num_steps"])
    for bad, msg in ((np.array([1e-6]), "operand ctrl has 1 values along its axis 0, not 2"),
                     (np.array([-1.0, 0.0]), "PIDController(rtol=-1)"),
                     (np.array([[1e-6, 0.0], [1e-3, 0.0]]),
                      "the step size controller's rtol changes from trajectory to trajectory")):
        args = operands(y0)
        args[8] = bad
        c.errors.clear()
        assert handler("fwd")(C.pointer(c.frame(args, results(2), {"plan": h}))) is not None
        (code, text), = c.errors
        assert code == INVALID_ARGUMENT and msg in text, (msg, text)


def reverse_frame(c, ct, token, args, want=1 | 128, n_params=40, f64=True):
    dt = np.float64 if f64 else np.float32
    rets = [np.full(np.shape(args[0]), -7.0, dt), np.full(n_params, -7.0, dt)]
    rets = [r for bit, r in zip((1, 128), rets) if want & bit]
    return c.frame([ct, token] + list(args), rets, {"plan": c.h, "want": want}), rets


def test_a_reverse_frame_gives_solution_vjps_bits_from_the_tape_and_on_a_miss():
    c = Call()
    c.h = plan()
    y0 = np.array([[0.5, -0.2], [0.1, 0.3], [-1.0, 0.7]])
    args = operands(y0)
    sol = clnode.solve(model_of(args[7]), y0, t0=0.0, t1=1.0, dt0=0.1, method="tsit5",
                       max_steps=64, precision="fp64", rtol=1e-6, atol=1e-8, keep_tape=True)
    ct = np.random.default_rng(11).standard_normal((3, 1, 2))
    g = sol.vjp(ct)
    want_params = np.concatenate([np.ravel(g.params["layers.0.weight"]),
                                  g.params["layers.0.bias"],
                                  np.ravel(g.params["layers.1.weight"])])
    fwd = results(3)
    assert handler("fwd")(C.pointer(c.frame(args, fwd, {"plan": c.h, "keep": 1}))) is None
    token = fwd[3]
    assert np.all(token == token[0]) and token[0] < 0  # one negative token for the batch
    for tok, hit in ((token, True), (token, False), (np.zeros(3, np.int32), False),
                     (np.full(3, -2 ** 31, np.int32), False)):
        before = XLA["tape_stats"]()
        f, rets = reverse_frame(c, ct, tok, args)
        assert handler("vjp")(C.pointer(f)) is None, c.errors
        after = XLA["tape_stats"]()
        assert after["hits"] - before["hits"] == hit  # the tape is taken once: then a miss
        assert after["misses"] - before["misses"] == (not hit)
        np.testing.assert_array_equal(rets[0], g.y0)
        np.testing.assert_array_equal(rets[1], want_params)
    # y0's cotangent alone
    f, rets = reverse_frame(c, ct, token, args, want=1)
    assert handler("vjp")(C.pointer(f)) is None and c.errors == []
    np.testing.assert_array_equal(rets[0], g.y0)


def test_a_reverse_frames_errors_name_what_is_wrong():
    c = Call()
    c.h = plan()
    y0 = np.array([[0.5, -0.2], [0.1, 0.3]])
    args = operands(y0)
    ct = np.ones((2, 1, 2))
    nan_ct = ct.copy()
    nan_ct[1, 0, 1] = np.inf
    token = np.zeros(2, np.int32)
    cases = [
        (ct, token.astype(np.float64), 1 | 128, "operand token has dtype float64, not int32"),
        (ct, np.zeros(3, np.int32), 1 | 128,
         "operand token has 3 along leading axis 0, where the batch has 2"),
        (np.ones((2, 2, 2)), token, 1 | 128,
         "operand the cotangent of ys has 2 values along its axis 1, not 1"),
        (np.ones((2, 1, 3)), token, 1 | 128,
         "operand the cotangent of ys has 3 values along its axis 2, not 2"),
        (ct.astype(np.float32), token, 1 | 128,
         "operand the cotangent of ys has dtype float32, not float64"),
        (ct, token, 2, "attribute want 2"),  # t0: no gradient
        (nan_ct, token, 1 | 128, "the cotangent of trajectory 1, slot 0, component 1 is inf"),
    ]
    for ct_, tok, want, msg in cases:
        c.errors.clear()
        f, _ = reverse_frame(c, ct_, tok, args, want=want)
        assert handler("vjp")(C.pointer(f)) is not None, msg
        (code, text), = c.errors
        assert code == INVALID_ARGUMENT and msg in text, (msg, text)
        assert text.endswith("in clnode.jax.diffeqsolve)"), text
    # a result of another shape than its operand's
    c.errors.clear()
    f, _ = reverse_frame(c, ct, token, args, n_params=39)
    assert handler("vjp")(C.pointer(f)) is not None
    assert "operand params has 39 values along its axis 0, not 40" in c.errors[0][1]
