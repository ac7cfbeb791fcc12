"""From a trained model to the command line (doc/deploy.md): `pip install .` puts the tools in the
environment's bin/; a model trained through clnode.jax.diffeqsolve and saved with the settings
of its training solve (clnode.jax.solve_settings, MLP.save(path, settings=...)) is solved by that
clnode-solve with those settings as its defaults, with the same bytes as clnode.solve with them,
in fp32 and fp64 (and as the training's forward in fp64); an option given on the command line
wins."""
import json
import os
import struct
import subprocess
import sysconfig

import numpy as np
import pytest

import clnode

SCRIPTS = sysconfig.get_path("scripts")
TOOLS = ("clnode-solve", "clnode-devices", "clnode-compare", "clnode-bench")


def _env():
    """The environment's bin/ first on PATH, and no library path: the tools run as installed."""
    env = dict(os.environ, PATH=SCRIPTS + os.pathsep + os.environ.get("PATH", ""))
    env.pop("LD_LIBRARY_PATH", None)
    return env


def _run(args, cwd):
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=300)


def test_the_tools_are_installed_with_the_package(tmp_path):
    for name in TOOLS:
        assert os.access(os.path.join(SCRIPTS, name), os.X_OK), \
            f"{name} is not installed in {SCRIPTS} (pyproject.toml's install tags)"
        r = _run([name, "--version"], tmp_path)
        assert r.returncode == 0 and clnode.__version__ in r.stdout, (name, r.stdout, r.stderr)


def test_the_installed_clnode_compare_finds_its_plot_script(tmp_path):
    pytest.importorskip("matplotlib")
    r = _run(["clnode-compare", "--devices", "host", "--batches", "1", "--precisions", "fp64",
              "--gemm-modes", "strict", "--no-sensitivity", "--t1", "0.5", "--plot", "p.png"],
             tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.png").stat().st_size > 0


@pytest.fixture(scope="module")
def trained():
    """A small neural ODE trained for a few steps through clnode.jax.diffeqsolve (gradients by
    the library's reverse pass), and the settings of its training solve as clnode.solve's
    keywords."""
    jax, eqx, diffrax = (pytest.importorskip(m) for m in ("jax", "equinox", "diffrax"))
    import jax.numpy as jnp

    import clnode.jax

    mlp = eqx.nn.MLP(2, 2, 8, 1, activation=jax.nn.tanh, key=jax.random.PRNGKey(0))
    ts = np.linspace(0.0, 1.0, 5)
    y0 = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.5, -0.5]])
    target = y0[:, None, :] * jnp.exp(-jnp.asarray(ts))[None, :, None]  # y' = -y
    solve = dict(stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
                 saveat=diffrax.SaveAt(ts=jnp.asarray(ts)), max_steps=256)

    def forward(net, y0):  # the vector field: a function reading the network
        term = diffrax.ODETerm(lambda t, y, args: net(y))
        return jax.vmap(lambda y: clnode.jax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y,
                                                         **solve).ys)(y0)

    def loss(net):
        return jnp.mean((forward(net, y0) - target) ** 2)

    step = eqx.filter_value_and_grad(loss)
    losses = []
    for _ in range(4):
        value, grads = step(mlp)
        losses.append(float(value))
        mlp = eqx.apply_updates(mlp, jax.tree_util.tree_map(lambda g: -0.5 * g, grads))
    assert losses[-1] < losses[0], losses
    # the training solve's settings, from its own arguments
    settings = clnode.jax.solve_settings(diffrax.Tsit5(), 0.0, 1.0, 0.1, y0[0], **solve)
    saveat = settings.pop("saveat")
    assert settings == dict(method="tsit5", precision="fp64", t0=0.0, t1=1.0, dt0=0.1,
                            rtol=1e-6, atol=1e-8, max_steps=256, constant_step=False, pcoeff=0.0,
                            icoeff=1.0, dcoeff=0.0, force_dtmin=True, factormin=0.2,
                            factormax=10.0, safety=0.9)
    assert (saveat.t0, saveat.t1, saveat.steps, saveat.ts.tolist()) == \
        (False, False, False, ts.tolist())
    settings["saveat"] = saveat
    return clnode.from_equinox(mlp), settings, lambda y: np.asarray(forward(mlp, y))


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_clnode_solve_takes_the_training_settings(trained, tmp_path, precision):
    model, settings, jax_forward = trained
    settings = dict(settings, precision=precision)
    if precision == "fp32":
        settings.update(rtol=1e-4, atol=1e-6)
    model.save(tmp_path / "m.safetensors", settings=settings)
    assert clnode.MLP.load(tmp_path / "m.safetensors") == model
    y0 = np.random.default_rng(1).normal(size=(6, 2))
    np.save(tmp_path / "y0.npy", y0)

    want = clnode.solve(model, y0, device="host", **settings)
    assert want.ok and want.ys.shape == (6, 5, 2)
    r = _run(["clnode-solve", "--model", "m.safetensors", "--y0-file", "y0.npy", "--out",
              "ys.npy", "--device", "host"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "settings from m.safetensors: " in r.stdout and "rtol" in r.stdout, r.stdout
    got = np.load(tmp_path / "ys.npy")
    assert got.dtype == want.ys.dtype and got.shape == want.ys.shape
    assert got.tobytes() == want.ys.tobytes()
    if precision == "fp64":  # the training's own forward, through clnode.jax
        assert got.tobytes() == jax_forward(y0).tobytes()

    # an option given wins; the others stay the file's
    want = clnode.solve(model, y0, device="host", **dict(settings, rtol=1e-3))
    r = _run(["clnode-solve", "--model", "m.safetensors", "--y0-file", "y0.npy", "--out",
              "ys3.npy", "--device", "host", "--rtol", "1e-3", "--quiet"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "ys3.npy").tobytes() == want.ys.tobytes()


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_clnode_solve_chooses_the_first_step_of_a_dt0_auto_file(tmp_path, precision):
    """settings dt0="auto" is written as clnode.dt0_auto "true", and clnode-solve --model then
    chooses each trajectory's first step: the bytes and first steps of clnode.solve(dt0="auto"),
    not those of its default first step."""
    rng = np.random.default_rng(5)
    model = clnode.MLP([rng.normal(size=(16, 3)) * 0.5, rng.normal(size=(3, 16)) * 0.5],
                       [rng.normal(size=16) * 0.1, rng.normal(size=3) * 0.1], activation="tanh")
    y0 = rng.normal(size=(4, 3)) * np.array([[0.1], [1.0], [3.0], [10.0]])
    np.save(tmp_path / "y0.npy", y0)
    settings = dict(t0=0.0, t1=2.0, dt0="auto", rtol=1e-5, atol=1e-7, precision=precision,
                    saveat=clnode.SaveAt(ts=[0.5, 1.0, 1.5, 2.0]))
    model.save(tmp_path / "m.safetensors", settings=settings)
    meta = _metadata((tmp_path / "m.safetensors").read_bytes())
    assert meta["clnode.dt0_auto"] == "true" and "clnode.dt0" not in meta, meta

    want = clnode.solve(model, y0, device="host", **settings)
    fixed = clnode.solve(model, y0, device="host", **dict(settings, dt0=None))
    assert want.ok and want.ys.tobytes() != fixed.ys.tobytes()  # the choice shows in the bytes
    r = _run(["clnode-solve", "--model", "m.safetensors", "--y0-file", "y0.npy", "--out",
              "ys.npy", "--device", "host", "--quiet"], tmp_path)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "ys.npy")
    assert got.dtype == want.ys.dtype and got.tobytes() == want.ys.tobytes()
    r = _run(["clnode-solve", "--model", "m.safetensors", "--y0-file", "y0.npy", "--json",
              "--device", "host"], tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert "dt0_auto" in doc["settings_from_model"], doc["settings_from_model"]
    first = [t["first_step"] for t in doc["trajectories"]]
    cast = np.float32 if precision == "fp32" else np.float64
    np.testing.assert_array_equal(np.asarray(first, cast).astype(np.float64),
                                  want.stats["first_step"])
    assert len(set(first)) == 4 and 0.01 not in first, first


def _metadata(data):
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n])["__metadata__"]


def test_settings_are_written_as_named_keys():
    m = clnode.MLP([np.eye(2)], activation="tanh")
    meta = _metadata(m.to_bytes(settings=dict(
        t0=0, t1=2.5, dt0=None, rtol=1e-6, atol=np.float64(1e-9), method="dopri5",
        precision=np.float64, max_steps=100, constant_step=False, dtmax=None,
        saveat=clnode.SaveAt(ts=[0.5, 1.0, 2.5]))))
    assert {k: v for k, v in meta.items() if k.startswith("clnode.")} == {
        "clnode.t0": "0.0", "clnode.t1": "2.5", "clnode.rtol": "1e-06", "clnode.atol": "1e-09",
        "clnode.method": "dopri5", "clnode.precision": "fp64", "clnode.max_steps": "100",
        "clnode.constant_step": "false", "clnode.save_t0": "false", "clnode.save_t1": "false",
        "clnode.save_steps": "false", "clnode.save_ts": "0.5,1.0,2.5"}
    assert "clnode.dt0" not in meta  # dt0=None: the default (0.01), written as nothing
    assert _metadata(m.to_bytes()) == {"activation": "tanh", "final_activation": "identity",
                                       "time_input": "false"}


@pytest.mark.parametrize("settings, error, says", [
    ({"rtl": 1e-4}, TypeError, "'rtl'"),
    ({"y0": 1.0}, TypeError, "'y0'"),
    ({"compact": True}, ValueError, "compact"),
    ({"keep_tape": True}, ValueError, "keep_tape"),
    ({"rtol": -1.0}, ValueError, "rtol"),
    ({"factormin": 1.5}, ValueError, "factormin"),
    ({"max_steps": 0}, ValueError, "max_steps"),
    ({"rtol": "1e-4"}, TypeError, "rtol"),
    ({"t1": float("inf")}, ValueError, "t1"),
    ({"t1": [1.0, 2.0]}, ValueError, "t1"),
    ({"precision": "fp16"}, ValueError, "precision"),
    ({"method": "rk4"}, ValueError, "method"),
    ({"t0": 0.0, "t1": 1.0, "dt0": -0.1}, ValueError, "dt0"),
    ({"dt0": "fast"}, ValueError, '"auto"'),
    ({"dt0": "auto", "constant_step": True}, ValueError, "dt0_auto"),
    ({"dt0": 0.1, "dt0_auto": True}, ValueError, "dt0_auto"),
    ({"saveat": clnode.SaveAt(ts=[[0.5], [1.0]])}, ValueError, "one list of save times"),
    ({"saveat": "t1"}, TypeError, "SaveAt"),
    ([("rtol", 1e-4)], TypeError, "dict"),
])
def test_bad_settings_are_refused_by_name(tmp_path, settings, error, says):
    m = clnode.MLP([np.eye(2)])
    with pytest.raises(error, match=says):
        m.save(tmp_path / "m.safetensors", settings=settings)
    assert not (tmp_path / "m.safetensors").exists()
