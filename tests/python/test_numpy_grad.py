"""clnode.solve(keep_tape=True).vjp(ys_bar): the host reverse pass from numpy. Oracles: central
finite differences of clnode's own float64 solve with constant steps (the steps do not move, so
the discrete map is smooth), and the batch's invariants (a trajectory's gradient alone equals
its rows in a batch, bit for bit; the parameters' gradient of a batch is that of the loss summed
over it)."""
import numpy as np
import pytest

import clnode

T_END, DT = 1.0, 0.05


def model(inputs=0, time_input=False, out_scale=None, seed=3):
    rng = np.random.default_rng(seed)
    n, h = 3, 8
    n_in = n + inputs + (1 if time_input else 0)
    ws = [rng.standard_normal((h, n_in)) * 0.5, rng.standard_normal((n, h)) * 0.5]
    bs = [rng.standard_normal(h) * 0.1, None]
    return clnode.MLP(ws, bs, activation="tanh", final_activation="identity",
                      time_input=time_input, inputs=inputs, out_scale=out_scale)


def solve(m, y0, args=None, **kw):
    return clnode.solve(m, y0, t0=0.0, t1=T_END, dt0=DT, args=args, precision="fp64",
                        method="tsit5", constant_step=True,
                        saveat=clnode.SaveAt(t1=True, ts=[0.3, 0.6]), **kw)


def loss_of(m, y0, args, w):
    return float(np.sum(w * solve(m, y0, args).ys))


def rebuilt(m, name, value):
    """m with parameter `name` (as Solution.vjp names them) replaced."""
    ws, bs, s = list(m.weights), list(m.biases), m.out_scale
    if name == "out_scale":
        s = value
    else:
        i, kind = int(name.split(".")[1]), name.split(".")[2]
        (ws if kind == "weight" else bs)[i] = value
    return clnode.MLP(ws, bs, activation=m.activation, final_activation=m.final_activation,
                      time_input=m.time_input, inputs=m.num_inputs, out_scale=s)


@pytest.mark.parametrize("inputs, time_input, out_scale", [
    (0, False, None), (2, True, 0.7), (1, False, [0.5, -1.2, 2.0])])
def test_vjp_matches_finite_differences(inputs, time_input, out_scale):
    m = model(inputs, time_input, out_scale)
    rng = np.random.default_rng(7)
    B = 3
    y0 = rng.standard_normal((B, 3))
    args = rng.standard_normal((B, inputs)) if inputs else None
    sol = solve(m, y0, args, keep_tape=True)
    w = rng.standard_normal(sol.ys.shape)
    g = sol.vjp(w)
    assert g.y0.shape == y0.shape and (g.args is None) == (args is None)
    names = {f"layers.0.weight", "layers.0.bias", "layers.1.weight"}
    assert set(g.params) == names | ({"out_scale"} if out_scale is not None else set())
    h = 1e-6
    worst = 0.0

    def check(fd, got):
        nonlocal worst
        worst = max(worst, abs(fd - got) / max(1.0, abs(fd)))

    for b in range(B):
        for j in range(3):
            e = np.zeros_like(y0)
            e[b, j] = h
            check((loss_of(m, y0 + e, args, w) - loss_of(m, y0 - e, args, w)) / (2 * h),
                  g.y0[b, j])
        for j in range(inputs):
            e = np.zeros_like(args)
            e[b, j] = h
            check((loss_of(m, y0, args + e, w) - loss_of(m, y0, args - e, w)) / (2 * h),
                  g.args[b, j])
    for name, grad in g.params.items():
        base = dict(zip([f"layers.{i}.weight" for i in range(2)], m.weights))
        base.update({f"layers.{i}.bias": b for i, b in enumerate(m.biases) if b is not None})
        if name == "out_scale":
            base["out_scale"] = np.asarray(m.out_scale).reshape(np.shape(grad))
        p = np.asarray(base[name], np.float64)
        for k in range(0, p.size, max(1, p.size // 6)):
            e = np.zeros(p.size)
            e[k] = h
            e = e.reshape(p.shape)
            fd = (loss_of(rebuilt(m, name, p + e), y0, args, w)
                  - loss_of(rebuilt(m, name, p - e), y0, args, w)) / (2 * h)
            check(fd, np.asarray(grad).reshape(-1)[k])
    assert worst < 1e-6, worst


def test_a_trajectory_alone_equals_its_rows_in_a_batch():
    m = model(2, True, 0.7)
    rng = np.random.default_rng(11)
    y0, args = rng.standard_normal((40, 3)), rng.standard_normal((40, 2))
    sol = solve(m, y0, args, keep_tape=True)
    w = rng.standard_normal(sol.ys.shape)
    g = sol.vjp(w)
    for b in (0, 33):
        one = solve(m, y0[b], args[b], keep_tape=True).vjp(w[b])
        assert one.y0.shape == (3,) and one.args.shape == (2,)
        assert np.array_equal(one.y0, g.y0[b]) and np.array_equal(one.args, g.args[b])
    # the parameters' gradient is of the loss summed over the batch: the pieces add up
    parts = [solve(m, y0[i:i + 20], args[i:i + 20], keep_tape=True).vjp(w[i:i + 20])
             for i in (0, 20)]
    for name, v in g.params.items():
        np.testing.assert_allclose(parts[0].params[name] + parts[1].params[name], v,
                                   rtol=1e-12, atol=1e-14)
    assert sol.vjp(w).params.keys() == g.params.keys()  # vjp may be called again
    assert all(np.array_equal(sol.vjp(w).params[k], g.params[k]) for k in g.params)


def test_vjp_refusals_name_the_problem():
    m = model()
    y0 = np.zeros((2, 3))
    with pytest.raises(ValueError, match="keep_tape=True"):
        solve(m, y0).vjp(np.zeros((2, 3, 3)))
    sol = solve(m, y0, keep_tape=True)
    with pytest.raises(ValueError, match=r"shape of ys, \(2, 3, 3\)"):
        sol.vjp(np.zeros((2, 3)))
    bad = np.zeros(sol.ys.shape)
    bad[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="trajectory 1"):
        sol.vjp(bad)
    with pytest.raises(TypeError):
        sol.vjp(np.zeros(sol.ys.shape, dtype=np.complex128))


def test_vjp_refuses_a_cotangent_beyond_float32_in_an_fp32_solve():
    """2^130 is finite in float64 but infinite once rounded to float32: an fp32 solve's reverse
    pass refuses it naming where (it gave NaN gradients); in an fp64 solve it is a value like
    any other, scaling the gradient exactly (a power of two)."""
    m = model()
    y0 = np.full((2, 3), 0.1)
    big = 2.0 ** 130
    kw = dict(t0=0.0, t1=T_END, dt0=DT, saveat=clnode.SaveAt(t1=True, ts=[0.3, 0.6]),
              keep_tape=True)
    sol = clnode.solve(m, y0, precision="fp32", **kw)
    w = np.ones(sol.ys.shape)
    w[1, 2, 0] = big
    with pytest.raises(clnode.InvalidArgumentError,
                       match=r"trajectory 1, slot 2, component 0 .*fp32 infinity"):
        sol.vjp(w)
    w[1, 2, 0] = np.float32(3e38)  # finite in float32: accepted
    assert np.isfinite(sol.vjp(w).y0[0]).all()
    # the rounding boundary, FLT_MAX plus half an ulp (2^128 - 2^103): below it a value rounds
    # to FLT_MAX and is taken, from it on to infinity and is refused, the message naming it
    edge = 2.0 ** 128 - 2.0 ** 103
    w[1, 2, 0] = np.nextafter(edge, 0.0)
    assert np.float32(w[1, 2, 0]) == np.finfo(np.float32).max
    assert np.isfinite(sol.vjp(w).y0[0]).all()
    w[1, 2, 0] = edge
    with pytest.raises(clnode.InvalidArgumentError, match=r"3.40282357e\+38"):
        sol.vjp(w)
    sol64 = clnode.solve(m, y0, precision="fp64", **kw)
    ones = sol64.vjp(np.ones(sol64.ys.shape))
    scaled = sol64.vjp(np.full(sol64.ys.shape, big))
    assert scaled.y0.tobytes() == (big * ones.y0).tobytes()
    for k, v in ones.params.items():
        assert scaled.params[k].tobytes() == (big * v).tobytes(), k


def test_checkpoint_every_without_keep_tape_is_refused():
    """checkpoint_every spaces the states a kept tape holds: without keep_tape=True it would do
    nothing, so it is refused, naming both; with it, it gives the default's gradient bits."""
    m = model()
    y0 = np.full((2, 3), 0.1)
    for extra in ({}, {"keep_tape": False}):
        with pytest.raises(ValueError, match="checkpoint_every.*keep_tape=True"):
            solve(m, y0, checkpoint_every=2, **extra)
    w = np.ones((2, 3, 3))
    a = solve(m, y0, keep_tape=True, checkpoint_every=2).vjp(w)
    b = solve(m, y0, keep_tape=True).vjp(w)
    assert a.y0.tobytes() == b.y0.tobytes()
    assert all(a.params[k].tobytes() == v.tobytes() for k, v in b.params.items())


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
def test_vjp_on_pocl_has_the_host_bits(pocl, precision):
    """A solve on PoCL goes back on PoCL (its own device), with the host's bits; device= moves
    the reverse pass (a host solve back on PoCL, a PoCL solve back on the host): the same bits."""
    m = model(2, True, [0.5, -1.2, 2.0])
    rng = np.random.default_rng(11)
    B = 70  # three blocks of the parameters' sum, the last one partial
    y0, args = rng.standard_normal((B, 3)), rng.standard_normal((B, 2))
    t1 = rng.uniform(0.3, 1.0, B)  # different step counts inside each block
    kw = dict(t0=0.0, t1=t1, args=args, precision=precision, rtol=1e-5, atol=1e-7,
              saveat=clnode.SaveAt(t0=True, t1=True, ts=np.linspace(0.0, 0.25, 4)),
              keep_tape=True, checkpoint_every=2)
    host = clnode.solve(m, y0, device="host", **kw)
    dev = clnode.solve(m, y0, device=pocl, **kw)
    w = rng.standard_normal(host.ys.shape)
    w[~np.isfinite(host.ys)] = 0.0
    ref = host.vjp(w)
    for g in (dev.vjp(w), dev.vjp(w, device="host"), host.vjp(w, device=pocl)):
        assert g.y0.tobytes() == ref.y0.tobytes()
        assert g.args.tobytes() == ref.args.tobytes()
        for k, v in ref.params.items():
            assert g.params[k].tobytes() == v.tobytes(), k
