"""clnode's XLA handlers for the CUDA platform (python/clnode/_clnode_xla_cuda.c) driven without
XLA and without a GPU, by the synthetic call frames of test_jax_ffi_frames.py: the metadata query
answered as the CPU handlers answer it (no traits: not command-buffer compatible), the frame's
buffers checked before CUDA is touched, XLA's stream asked for and its error passed on, and,
where the CUDA runtime cannot copy (no driver or no library here), a clear message with XLA's
UNAVAILABLE. A forward whose plan names a CUDA device goes to the path on XLA's buffers
(clnode_solve_device on a context adopting XLA's stream), and so does a reverse pass
(clnode_gradient_compute_device), which here fail naming why; the rest stays staged. In a subprocess with a stand-in CUDA runtime (memcpy for the stream's copies, built
with the system's C compiler), a forward frame through the CUDA handler gives the CPU handler's
bits, and its copies go on the stream XLA gave."""
import ctypes as C
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("jax")

from clnode import _clnode  # noqa: E402
from test_jax_ffi_frames import (HANDLER, INVALID_ARGUMENT, Buffer, Call,  # noqa: E402
                                 _get, check_metadata_answer, operands, plan, results)

CUDA_XLA = _clnode._xla_cuda()
UNAVAILABLE, UNIMPLEMENTED = 14, 12
STREAM_GET = C.CFUNCTYPE(C.c_void_p, C.c_void_p)


def cuda_handler(name):
    return HANDLER(_get(CUDA_XLA[name], None))


def with_stream(call, stream=0x5EED, error=None):
    """Gives call's API an XLA_FFI_Stream_Get answering `stream` (or returning `error`)."""
    def get(args):
        # XLA_FFI_Stream_Get_Args: struct_size, extension_start, ctx, stream (out)
        fields = C.cast(args, C.POINTER(C.c_void_p))
        fields[3] = stream
        call.asked = fields[2]
        return error
    call.stream_cb = STREAM_GET(get)
    call.api.stream_get = C.cast(call.stream_cb, C.c_void_p)
    return call


def test_metadata_query_is_the_cpu_handlers():
    check_metadata_answer(cuda_handler)  # no traits: not command-buffer compatible


def test_buffers_are_checked_before_cuda():
    c = with_stream(Call())
    h = plan()
    args = operands([[0.5, -0.2]])
    f = c.frame(args, results(1), {"plan": h})
    f.args.types[2] = 7  # not a buffer
    c.asked = None
    assert cuda_handler("fwd")(C.pointer(f)) is not None
    (code, text), = c.errors
    assert code == INVALID_ARGUMENT and "operand 2 is not a buffer" in text, text
    assert c.asked is None  # the stream was not asked for
    c.errors.clear()
    f = c.frame(args, results(1), {"plan": h})
    C.cast(f.args.args[0], C.POINTER(Buffer)).contents.dtype = 10  # F16: not one clnode takes
    assert cuda_handler("vjp")(C.pointer(f)) is not None
    (code, text), = c.errors
    assert code == INVALID_ARGUMENT and "operand 0 is not a buffer of a dtype" in text, text


def test_stream_errors_and_missing_stream_get_pass_on():
    c = with_stream(Call(), error=0xBAD)
    f = c.frame(operands([[0.5, -0.2]]), results(1), {"plan": plan()})
    assert cuda_handler("fwd")(C.pointer(f)) == 0xBAD  # XLA's own error, returned as it is
    c = Call()  # no XLA_FFI_Stream_Get in the table
    f = c.frame(operands([[0.5, -0.2]]), results(1), {"plan": plan()})
    assert cuda_handler("fwd")(C.pointer(f)) is not None
    (code, text), = c.errors
    assert code == UNIMPLEMENTED and "XLA_FFI_Stream_Get" in text


def test_without_a_gpu_the_copy_fails_clearly():
    c = with_stream(Call(), stream=0)
    f = c.frame(operands([[0.5, -0.2]]), results(1), {"plan": plan()})
    assert cuda_handler("fwd")(C.pointer(f)) is not None
    (code, text), = c.errors
    # no runtime: "cannot load the CUDA runtime"; a runtime without a driver or GPU: the CUDA
    # error of the first copy, by name
    assert code == UNAVAILABLE, text
    assert ("cannot load the CUDA runtime" in text
            or "cudaMemcpyAsync (an operand to the host)" in text), text
    assert text.startswith("clnode's CUDA custom call (forward): ")
    assert text.endswith("(clnode.DeviceError, in clnode.jax.diffeqsolve)"), text


NOT_FOUND = 5
ON_DEVICE = "clnode's CUDA custom call (forward, on XLA's buffers): "
STAGED = "clnode's CUDA custom call (forward): "


def cuda_forward_error(h, y0, B, attrs=None, stream=0x5EED, T=1):
    """The CUDA forward handler's error on a frame of plan h: (code, text, stream asked for)."""
    c = with_stream(Call(), stream=stream)
    f = c.frame(operands(y0), results(B, T), dict({"plan": h}, **(attrs or {})))
    c.asked = "not asked"
    assert cuda_handler("fwd")(C.pointer(f)) is not None
    (code, text), = c.errors
    return code, text, c.asked != "not asked"


def test_a_cuda_plans_forward_runs_on_xlas_buffers():
    """A forward whose plan names a CUDA device and whose y0 has a row per trajectory takes the
    path on XLA's buffers, keeping its tape or not: its context adopts XLA's stream, which
    without a GPU fails by name (no copy through the host is tried)."""
    y0 = [[0.5, -0.2], [0.1, 0.3], [-1.0, 0.7]]
    for device, ordinal, keep in (("cuda", 0, 0), ("cuda:1", 1, 0), ("cuda", 0, 1)):
        code, text, asked = cuda_forward_error(plan(device=device), y0, 3, {"keep": keep})
        check_adoption_failed(code, text, asked, ON_DEVICE, ordinal)


def check_adoption_failed(code, text, asked, prefix, ordinal):
    """The error of a call on XLA's buffers without a GPU: XLA's stream asked for, then the
    context adopting it refused by the library (no CUDA library, driver or device), before any
    copy through the host."""
    assert asked, text  # XLA's stream was asked for
    assert text.startswith(prefix), text
    assert text.endswith("(clnode.DeviceError, in clnode.jax.diffeqsolve)"), text
    if "no CUDA backend" in text:  # a build without the CUDA backend
        assert code == UNAVAILABLE, text
        return
    assert code == NOT_FOUND, text
    assert f"clnode_context_create_cuda(device {ordinal}, the caller's stream): " in text, text
    assert "cuda not available: " in text or "no CUDA device" in text, text
    assert "cudaMemcpyAsync" not in text, text


def test_what_a_cuda_plans_forward_still_stages():
    """y0 shared by the batch, saved points other than the save times or t1 alone, a plan on
    another device: staged through the host, as before (the copy's error, not the adoption's)."""
    cases = [(plan(device="cuda"), [0.5, -0.2], 2, None),  # y0 shared by the 2 trajectories
             (plan(device="cuda", T=2), [[0.5, -0.2]], 1, {"T": 2}),  # 2 slots: not t1 alone
             (plan(device="host"), [[0.5, -0.2]], 1, None),
             (plan(device="cuda:x"), [[0.5, -0.2]], 1, None)]
    for h, y0, B, attrs in cases:
        T = (attrs or {}).pop("T", 1)
        code, text, _ = cuda_forward_error(h, y0, B, attrs, stream=0, T=T)
        assert code == UNAVAILABLE, text
        assert text.startswith(STAGED), text
        assert ("cannot load the CUDA runtime" in text
                or "cudaMemcpyAsync (an operand to the host)" in text), text


ON_DEVICE_REV = "clnode's CUDA custom call (reverse, on XLA's buffers): "
STAGED_REV = "clnode's CUDA custom call (reverse): "


def cuda_reverse_error(h, y0, B, want=1 | 128, attrs=None, stream=0x5EED, f64=True,
                       ret_dtypes=None):
    """The CUDA reverse handler's error on a frame of plan h (the forward's operands from y0, a
    cotangent and a token per trajectory): (code, text, stream asked for)."""
    dt = np.float64 if f64 else np.float32
    c = with_stream(Call(), stream=stream)
    args = operands(y0, dtype=dt)
    ct = np.ones((B, 1, 2), dt)
    token = np.full(B, -5, np.int32)
    shapes = {1: np.shape(args[0]), 128: (40,)}
    rets = [np.zeros(shapes[bit], (ret_dtypes or {}).get(bit, dt)) for bit in (1, 128)
            if want & bit]
    f = c.frame([ct, token] + args, rets, dict({"plan": h, "want": want}, **(attrs or {})))
    c.asked = "not asked"
    assert cuda_handler("vjp")(C.pointer(f)) is not None
    (code, text), = c.errors
    return code, text, c.asked != "not asked"


def test_a_cuda_plans_reverse_runs_on_xlas_buffers():
    """A reverse pass whose plan names a CUDA device, with a row per trajectory of y0, the
    cotangent and the token, takes the path on XLA's buffers (clnode_gradient_compute_device):
    its context adopts XLA's stream, which without a GPU fails by name before any copy through
    the host (the token's included)."""
    y0 = [[0.5, -0.2], [0.1, 0.3], [-1.0, 0.7]]
    for device, ordinal, want, f64 in (("cuda", 0, 1 | 128, True), ("cuda:1", 1, 128, True),
                                       ("cuda", 0, 1, False)):
        code, text, asked = cuda_reverse_error(plan(device=device, f64=f64), y0, 3, want,
                                               f64=f64)
        check_adoption_failed(code, text, asked, ON_DEVICE_REV, ordinal)


def test_what_a_cuda_plans_reverse_still_stages():
    """A plan on another device, gradients kept per index of a vmapped axis (keep), y0 shared by
    the batch (its gradient a sum), a result of another dtype than the solve's: staged through
    the host, as before (the copy's error, not the adoption's)."""
    y0 = [[0.5, -0.2], [0.1, 0.3]]
    cases = [(plan(device="host"), y0, 2, {}, None),
             (plan(device="cuda"), y0, 2, {"keep": 1}, None),
             (plan(device="cuda"), [0.5, -0.2], 2, {}, None),
             (plan(device="cuda"), y0, 2, {}, {128: np.float32})]
    for h, y, B, attrs, ret_dtypes in cases:
        code, text, _ = cuda_reverse_error(h, y, B, attrs=attrs, stream=0, ret_dtypes=ret_dtypes)
        assert text.startswith(STAGED_REV), text
        # the copies' error, or (a float32 result for float64 params) the operands' check
        assert (code == UNAVAILABLE and ("cannot load the CUDA runtime" in text
                                         or "cudaMemcpyAsync (an operand to the host)" in text)
                or (ret_dtypes and code == INVALID_ARGUMENT)), text


FAKE_CUDART = r"""
#include <stddef.h>
#include <string.h>
void *g_streams[64]; int g_copies;
int cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, void *stream)
{ (void)kind; if (g_copies < 64) g_streams[g_copies] = stream; g_copies++; memcpy(d, s, n); return 0; }
int cudaStreamSynchronize(void *s) { (void)s; return 0; }
const char *cudaGetErrorName(int e) { (void)e; return "cudaErrorFake"; }
const char *cudaGetErrorString(int e) { (void)e; return "fake"; }
"""

CHILD = textwrap.dedent("""
    import ctypes as C, sys
    import numpy as np
    fake = C.CDLL(sys.argv[1], mode=C.RTLD_GLOBAL)  # loaded first: the handler takes it
    import test_jax_ffi_cuda_frames as t, test_jax_ffi_frames as cpu
    c = t.with_stream(t.Call(), stream=0x5EED)
    h = t.plan()
    y0 = np.array([[0.5, -0.2], [0.1, 0.3], [-1.0, 0.7]])
    args, rets, ref = t.operands(y0), t.results(3), t.results(3)
    assert t.cuda_handler("fwd")(C.pointer(c.frame(args, rets, {"plan": h}))) is None, c.errors
    assert cpu.handler("fwd")(C.pointer(c.frame(args, ref, {"plan": h}))) is None
    for a, b in zip(rets, ref):
        np.testing.assert_array_equal(a, b)
    n = C.c_int.in_dll(fake, "g_copies").value
    streams = (C.c_void_p * 64).in_dll(fake, "g_streams")
    assert n == sum(a.size > 0 for a in args + rets), n  # every operand in, every result out
    assert all(streams[i] == 0x5EED for i in range(n))  # all on XLA's stream
    print("ok", n)
""")


def test_a_forward_through_the_cuda_handler_gives_the_cpu_handlers_bits(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the stand-in CUDA runtime")
    src = tmp_path / "fake_cudart.c"
    src.write_text(FAKE_CUDART)
    lib = tmp_path / "libcudart.so.13"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcudart.so.13", "-o", str(lib),
                    str(src)], check=True)
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.abspath(__file__))] +
                                          [p for p in [os.environ.get("PYTHONPATH")] if p]))
    out = subprocess.run([sys.executable, "-c", CHILD, str(lib)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("ok 9"), out.stdout  # 5 non-empty operands, 4 results
