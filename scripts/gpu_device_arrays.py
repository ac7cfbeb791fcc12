"""gpu_device_arrays.py - run by scripts/gpu-check.sh on a GPU machine: the solves that read and
write device memory (clnode_solve_device) from the front ends, against the same solves from host
arrays, bit for bit:
  jax    a jitted forward on device="cuda" with its operands on the GPU (clnode.jax's CUDA
         custom call on XLA's buffers and stream), and jitted gradients through it of the
         network's parameters, y0 and args (the forward keeping its tape, the reverse pass on
         XLA's buffers), against the CPU's;
  torch  clnode.torch.odeint of CUDA tensors under torch.no_grad() and with a gradient (the
         library on the tensors' memory and torch's current stream), against CPU tensors'.
Each part says whether it ran; exit 1 when a part that ran differs, 77 when neither could run."""
import sys

import numpy as np


def check_jax() -> str:
    try:
        import diffrax
        import equinox as eqx
        import jax
        import jax.numpy as jnp
        gpu = jax.devices("gpu")[0]
        from clnode.jax import diffeqsolve
    except Exception as e:  # no JAX on a GPU here
        return f"not run: {e}"

    class Field(eqx.Module):
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.mlp(jnp.concatenate([y, args]))

    f = Field(eqx.nn.MLP(4, 2, 16, 2, activation=jnp.tanh, key=jax.random.PRNGKey(1)))
    rng = np.random.default_rng(7)
    y0s = rng.standard_normal((5, 2)).astype(np.float32)
    args = rng.standard_normal((5, 2)).astype(np.float32)
    ts = np.linspace(0.1, 1.0, 6).astype(np.float32)

    def solve(y, c, device, field=f):
        return diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 1.0, 0.05, y, c,
                           saveat=diffrax.SaveAt(ts=ts), device=device,
                           stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-7)).ys

    run = jax.jit(jax.vmap(lambda y, c: solve(y, c, "cuda")))
    on_gpu = run(jax.device_put(y0s, gpu), jax.device_put(args, gpu))
    ref = jax.jit(jax.vmap(lambda y, c: solve(y, c, "host")), backend="cpu")(y0s, args)
    np.testing.assert_array_equal(np.asarray(on_gpu), np.asarray(ref))

    def loss(field, y, c, device):
        return jnp.sum(jax.vmap(lambda a, b: solve(a, b, device, field))(y, c) ** 2)

    # the gradients of y0, args and the network's parameters (the reverse pass on XLA's buffers
    # on the GPU: clnode_gradient_compute_device)
    grad = eqx.filter_grad(loss)
    f_gpu = jax.tree_util.tree_map(lambda x: jax.device_put(x, gpu) if eqx.is_array(x) else x, f)
    g_gpu = eqx.filter_jit(lambda fld, y, c: grad(fld, y, c, "cuda"))(
        f_gpu, jax.device_put(y0s, gpu), jax.device_put(args, gpu))
    g_ref = jax.jit(lambda y, c: grad(f, y, c, "host"), backend="cpu")(y0s, args)
    for a, b in zip(jax.tree_util.tree_leaves(g_gpu), jax.tree_util.tree_leaves(g_ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    gy_gpu = jax.jit(jax.grad(lambda y, c: loss(f, y, c, "cuda"), argnums=(0, 1)))(
        jax.device_put(y0s, gpu), jax.device_put(args, gpu))
    gy_ref = jax.jit(jax.grad(lambda y, c: loss(f, y, c, "host"), argnums=(0, 1)),
                     backend="cpu")(y0s, args)
    for a, b in zip(gy_gpu, gy_ref):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return (f"ok: {on_gpu.shape} the same bits on XLA's CUDA buffers as on the CPU, and the "
            "gradients of the parameters, y0 and args through it")


def check_torch() -> str:
    try:
        import torch
        from torch import nn

        import clnode.torch as ct
        if not torch.cuda.is_available():
            return "not run: torch sees no CUDA device"
    except Exception as e:
        return f"not run: {e}"

    class Field(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))

        def forward(self, t, y):
            return self.net(y)

    f = Field()
    y0 = torch.randn(5, 2)
    t = torch.linspace(0.0, 1.0, 6)
    with torch.no_grad():
        ref = ct.odeint(f, y0, t, rtol=1e-5, atol=1e-7)
        out = ct.odeint(f.cuda(), y0.cuda(), t, rtol=1e-5, atol=1e-7)
    assert out.is_cuda
    assert torch.equal(out.cpu(), ref), (out.cpu() - ref).abs().max()
    # with a gradient: the tape kept, the backward from it
    fc, fg = Field(), Field().cuda()
    yc, yg = y0.clone().requires_grad_(), y0.cuda().requires_grad_()
    ct.odeint(fc, yc, t, rtol=1e-5, atol=1e-7).square().sum().backward()
    ct.odeint(fg, yg, t, rtol=1e-5, atol=1e-7).square().sum().backward()
    assert torch.equal(yg.grad.cpu(), yc.grad), "the gradients of y0 differ"
    for (name, pc), (_, pg) in zip(fc.named_parameters(), fg.named_parameters()):
        assert torch.equal(pg.grad.cpu(), pc.grad), f"the gradients of {name} differ"
    return (f"ok: {tuple(out.shape)} the same bits on CUDA tensors as on CPU tensors, and the "
            "gradients")


def main() -> int:
    ran = 0
    for name, fn in (("jax", check_jax), ("torch", check_torch)):
        try:
            what = fn()
        except AssertionError as e:
            print(f"{name}: FAILED: {e}")
            return 1
        print(f"{name}: {what}")
        ran += what.startswith("ok")
    return 0 if ran else 77


if __name__ == "__main__":
    sys.exit(main())
