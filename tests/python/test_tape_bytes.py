"""Solution.tape_bytes() and clnode.vjp_from_tape: a kept solution as the library's tape bytes
(clnode_solution_tape_export, the layout of doc/gradient.md) and its gradient from them. Oracle:
Solution.vjp of the same solution, bit for bit (fp32 and fp64, save times, steps and t1, a model
with conditioning inputs and an output scale); the bytes' refusals by name."""
import numpy as np
import pytest

import clnode


def model(seed=4):
    rng = np.random.default_rng(seed)
    n, k, h = 2, 1, 8
    ws = [rng.standard_normal((h, n + 1 + k)) * 0.5, rng.standard_normal((n, h)) * 0.5]
    bs = [rng.standard_normal(h) * 0.1, rng.standard_normal(n) * 0.1]
    return clnode.MLP(ws, bs, activation="tanh", time_input=True, inputs=k,
                      out_scale=np.array([0.8, -1.1]))


def solve(m, precision, **kw):
    rng = np.random.default_rng(1)
    y0 = rng.standard_normal((5, 2))
    args = rng.standard_normal((5, 1))
    return clnode.solve(m, y0, t0=0.0, t1=2.0, dt0="auto", args=args, precision=precision,
                        rtol=1e-5, atol=1e-7, keep_tape=True, checkpoint_every=2,
                        saveat=clnode.SaveAt(ts=[0.3, 1.1, 1.9], t1=True, **kw))


def same(a, b):
    assert a.y0.tobytes() == b.y0.tobytes()
    assert a.args.tobytes() == b.args.tobytes()
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert a.params[k].tobytes() == b.params[k].tobytes(), k


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("steps", [False, True])
def test_vjp_from_tape_is_vjp_bit_for_bit(precision, steps):
    m = model()
    sol = solve(m, precision, steps=steps)
    tape = sol.tape_bytes()
    assert tape.dtype == np.uint8 and tape.ndim == 1
    assert bytes(tape[:8]) == b"CLNTAPE\0"
    w = np.random.default_rng(2).standard_normal(sol.ys.shape)
    w[~np.isfinite(sol.ys)] = 0.0  # the padding of saved steps
    same(clnode.vjp_from_tape(m, tape, w), sol.vjp(w))
    # any buffer of the bytes, and a model object of the same parameters
    same(clnode.vjp_from_tape(model(), bytes(tape), w), sol.vjp(w))


def test_tape_bytes_refusals_name_the_problem():
    m = model()
    sol = solve(m, "fp64")
    tape = sol.tape_bytes()
    w = np.ones(sol.ys.shape)
    with pytest.raises(clnode.InvalidArgumentError, match="short"):
        clnode.vjp_from_tape(m, tape[:-8], w)
    bad = tape.copy()
    bad[-5] ^= 1
    with pytest.raises(clnode.InvalidArgumentError, match="checksum"):
        clnode.vjp_from_tape(m, bad, w)
    bad = tape.copy()
    bad[8] += 1  # the layout's version
    with pytest.raises(clnode.InvalidArgumentError, match="version 3, this library reads "
                                                          "version 2"):
        clnode.vjp_from_tape(m, bad, w)
    bad[8] -= 2  # layout 1, which held the saved values
    with pytest.raises(clnode.InvalidArgumentError, match="version 1, this library reads "
                                                          "version 2"):
        clnode.vjp_from_tape(m, bad, w)
    with pytest.raises(clnode.InvalidArgumentError, match="not the one the tape was solved"):
        clnode.vjp_from_tape(model(seed=5), tape, w)
    with pytest.raises(ValueError, match="keep_tape"):
        clnode.solve(m, np.zeros((1, 2)), t0=0.0, t1=1.0, args=np.zeros((1, 1))).tape_bytes()


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
def test_tape_bytes_hold_no_saved_values(precision):
    """The tape holds what the reverse pass reads, not the saved values (the solve's ys): one
    more save time shared by the batch adds that time alone (one value in the state precision,
    padded to 8 bytes), not a point per trajectory (5 x (1 + 2) float64 before); the gradient
    from the bytes is still Solution.vjp's, bit for bit."""
    m = model()
    rng = np.random.default_rng(1)
    y0, args = rng.standard_normal((5, 2)), rng.standard_normal((5, 1))
    sols = [clnode.solve(m, y0, t0=0.0, t1=2.0, dt0="auto", args=args, precision=precision,
                         rtol=1e-5, atol=1e-7, keep_tape=True,
                         saveat=clnode.SaveAt(ts=np.linspace(0.1, 1.9, n))) for n in (3, 4)]
    assert sols[0].stats["num_steps"].tolist() == sols[1].stats["num_steps"].tolist()
    sizes = [s.tape_bytes().size for s in sols]
    assert 0 <= sizes[1] - sizes[0] <= 8, sizes
    w = np.random.default_rng(2).standard_normal(sols[1].ys.shape)
    same(clnode.vjp_from_tape(m, sols[1].tape_bytes(), w), sols[1].vjp(w))
