#!/usr/bin/env python3
"""test_cli_grad.py - clnode-solve --cotangents COT --grad-out G.npz, end to end on the host:

  - G.npz holds y0 (B, N), args (B, k) for a model with inputs and every parameter under the
    model file's names (layers.<l>.weight, layers.<l>.bias, out_scale), float64, of the
    parameters' shapes; its y0, args and parameters equal, bit for bit, those of the library's
    clnode_gradient_compute on the same solve (grad_ref, a small C program on the public API);
  - the pass is linear in the cotangents: twice the cotangents give exactly twice every array;
    float32 cotangents in a .npz (member ys) give the bytes of the same values in float64 .npy;
    --checkpoint-every 3 gives the bytes of the default; solved and reversed on opencl:pocl (where
    present), G has the host's bytes;
  - the cotangents' shape is that of --out's padded ys, --save steps included (T known after the
    solve), with --ragged too;
  - refusals (exit status 2, a message naming the cause, no G left behind): one flag without the
    other, a shape other than the saved values' (both named), a non-finite value, a value beyond
    float32's range in an fp32 solve (clnode-solve and the library's reverse pass; in fp64 it
    scales G exactly), an unknown npz member, --grad-out naming an input or --out, --grad-out
    not a .npz, --resume, MPI; the tape's options without the gradient (--keep-tape,
    --checkpoint-every) and --no-keep-tape with it.

    test_cli_grad.py SOLVE GRAD_REF

Standard library only. Exit status 0 when every check passes, 1 otherwise.
"""
import ast
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

SOLVE, GRAD_REF = map(os.path.abspath, sys.argv[1:3])
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")  # tests/
MODELS = os.path.join(HERE, "data", "models")
TMP = tempfile.mkdtemp(prefix="clnode-grad-")
ENV = dict(os.environ, CLNODE_NUM_THREADS="2")
ENV.pop("CLNODE_MPI", None)
FAILED = []


def run(args, timeout=600, env=None):
    p = subprocess.run(args, capture_output=True, timeout=timeout, env=env or ENV)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail),
          flush=True)
    if not cond:
        FAILED.append(name)


def path(name):
    return os.path.join(TMP, name)


# ---- .npy / .npz by hand ----

def npy(values, shape, dtype="<f8"):
    """The bytes numpy.save writes for a flat list of values of that shape."""
    shape_text = "(%s)" % ("%d," % shape[0] if len(shape) == 1 else ", ".join(map(str, shape)))
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, shape_text)
    pad = 64 - (10 + len(head) + 1) % 64
    head = (head + " " * (pad % 64) + "\n").encode("latin1")
    fmt = "<%d%s" % (len(values), "d" if dtype == "<f8" else "f")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + struct.pack(fmt, *values)


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)
    return path(name)


def write_npz(name, members):
    with zipfile.ZipFile(path(name), "w", zipfile.ZIP_STORED) as z:
        for k, v in members.items():
            z.writestr(k + ".npy", v)
    return path(name)


def parse_npy(data):
    """(dtype, shape, flat values) of a .npy image."""
    n = struct.unpack("<H", data[8:10])[0]
    h = ast.literal_eval(data[10:10 + n].decode("latin1"))
    body = data[10 + n:]
    shape = tuple(h["shape"])
    count = 1
    for d in shape:
        count *= d
    code = {"<f8": "d", "<f4": "f", "<i8": "q", "<i4": "i"}[h["descr"]]
    return h["descr"], shape, list(struct.unpack("<%d%s" % (count, code), body))


def read_npz(p):
    """{name: (dtype, shape, values)} in the archive's order."""
    out = {}
    with zipfile.ZipFile(p) as z:
        for info in z.infolist():
            out[info.filename[:-4]] = parse_npy(z.read(info))
    return out


def bits(values):
    return [struct.pack("<d", v) for v in values]


# ---- the library's gradient (grad_ref) ----

def grad_ref(model, y0, cot, args=None, options=()):
    rc, out, err = run([GRAD_REF, model, y0, cot] + ([args] if args else []) + list(options))
    if rc:
        return None, err
    arrays, name = {}, None
    for line in out.split():
        if line in ("y0", "args", "params"):
            name = line
            arrays[name] = []
        else:
            arrays[name].append(float.fromhex(line))
    return arrays, ""


def layer_names(n_layers, bias=True, scale=False):
    names = []
    for l in range(n_layers):
        names += ["layers.%d.weight" % l] + (["layers.%d.bias" % l] if bias else [])
    return names + (["out_scale"] if scale else [])


def solve_grad(extra, cot, out="g.npz"):
    for f in (out,):
        if os.path.exists(path(f)):
            os.remove(path(f))
    return run([SOLVE, "--quiet", "--cotangents", cot, "--grad-out", path(out)] + extra)


def compare_with_library(label, g, ref, names, inputs=False):
    check(label + ": G's y0 equals clnode_gradient_y0 bit for bit",
          ref is not None and bits(g["y0"][2]) == bits(ref["y0"]))
    if inputs:
        check(label + ": G's args equals clnode_gradient_inputs bit for bit",
              ref is not None and bits(g["args"][2]) == bits(ref["args"]))
    params = [v for n in names for v in g[n][2]]
    check(label + ": the parameters, in the order of clnode_gradient_params, bit for bit",
          ref is not None and bits(params) == bits(ref["params"]))


def seed_round_trip():
    """The seed model (10 -> 100 -> 100 -> 10, softplus), three trajectories, --save t0 and t1
    and two save times: G's members, shapes, dtypes, the library's bits, linearity, fp32
    cotangents, checkpointing."""
    B, T, N = 3, 4, 10
    y0 = [0.1 * ((i * 7) % 11) - 0.5 for i in range(B * N)]
    cot = [((i * 13) % 17) / 8.0 - 1.0 for i in range(B * T * N)]
    y0p = write("y0.npy", npy(y0, (B, N)))
    cotp = write("cot.npy", npy(cot, (B, T, N)))
    save = ["--save", "t0", "--save", "ts:1,2.5", "--save", "t1", "--t1", "4"]
    base = ["--y0-file", y0p] + save
    rc, _, err = solve_grad(base + ["--out", path("out.npz")], cotp)
    check("seed: --cotangents --grad-out succeeds", rc == 0, err)
    if rc:
        return
    ys = read_npz(path("out.npz"))["ys"]
    check("seed: the cotangents have the shape of --out's ys", ys[1] == (B, T, N), str(ys[1]))
    g = read_npz(path("g.npz"))
    names = layer_names(3)
    check("seed: G's members are y0 and the model's tensor names, in order",
          list(g) == ["y0"] + names, str(list(g)))
    shapes = {"y0": (B, N), "layers.0.weight": (100, 10), "layers.0.bias": (100,),
              "layers.1.weight": (100, 100), "layers.1.bias": (100,),
              "layers.2.weight": (10, 100), "layers.2.bias": (10,)}
    check("seed: every member float64 of its parameter's shape",
          all(g[k][0] == "<f8" and g[k][1] == s for k, s in shapes.items()),
          str({k: g[k][:2] for k in g}))
    check("seed: every value finite and not all zero",
          all(abs(v) < float("inf") for k in g for v in g[k][2]) and any(g["y0"][2]))
    ref, err = grad_ref("seed", y0p, cotp, None, ["t0=0", "t1=4", "save_t0=1", "ts=1,2.5"])
    check("seed: grad_ref ran", ref is not None, err)
    compare_with_library("seed", g, ref, names)
    # linear in the cotangents: 2 x cot gives exactly 2 x every array
    cot2 = write("cot2.npy", npy([2 * v for v in cot], (B, T, N)))
    rc, _, err = solve_grad(base, cot2, "g2.npz")
    g2 = read_npz(path("g2.npz")) if rc == 0 else {}
    check("seed: twice the cotangents give exactly twice every array",
          rc == 0 and all(bits(g2[k][2]) == bits([2 * v for v in g[k][2]]) for k in g), err)
    # float32 cotangents (exact in float32) in a .npz: the same bytes
    cotz = write_npz("cot.npz", {"ys": npy(cot, (B, T, N), "<f4")})
    rc, _, err = solve_grad(base, cotz, "g3.npz")
    check("seed: float32 cotangents in COT.npz (member ys) give the bytes of float64 .npy",
          rc == 0 and open(path("g3.npz"), "rb").read() == open(path("g.npz"), "rb").read(),
          err)
    rc, _, err = solve_grad(base + ["--checkpoint-every", "3"], cotp, "g4.npz")
    check("seed: --checkpoint-every 3 gives the bytes of the default",
          rc == 0 and open(path("g4.npz"), "rb").read() == open(path("g.npz"), "rb").read(),
          err)
    rc, _, _ = run([SOLVE, "--device", "opencl:pocl", "--t1", "0.5", "--quiet"])
    if rc == 0:
        rc, _, err = solve_grad(base + ["--device", "opencl:pocl"], cotp, "g5.npz")
        check("seed: solved and reversed on opencl:pocl: the host's bytes",
              rc == 0 and open(path("g5.npz"), "rb").read() == open(path("g.npz"), "rb").read(),
              err)
    else:
        print("note: no opencl:pocl device; the device case is not run", flush=True)


def inputs_and_steps():
    """cond4x2 (2 conditioning inputs) with --save steps: T from the solve, args in G; node2x64v
    (an output scale per component) with fp64."""
    B, N, K = 2, 4, 2
    model = os.path.join(MODELS, "cond4x2.safetensors")
    y0p = write("y0c.npy", npy([0.3, -0.2, 0.1, 0.5, -0.4, 0.2, 0.0, 0.1], (B, N)))
    argp = write("args.npy", npy([0.5, -1.0, 1.5, 0.25], (B, K)))
    base = ["--model", model, "--y0-file", y0p, "--args-file", argp, "--t1", "2",
            "--save", "steps"]
    rc, _, err = run([SOLVE, "--quiet", "--out", path("outc.npz")] + base)
    check("cond4x2: the forward solve", rc == 0, err)
    if rc:
        return
    T = read_npz(path("outc.npz"))["ys"][1][1]
    cot = [((i * 5) % 9) / 4.0 - 1.0 for i in range(B * T * N)]
    cotp = write("cotc.npy", npy(cot, (B, T, N)))
    rc, _, err = solve_grad(base, cotp)
    check("cond4x2 --save steps: G written with T from the solve", rc == 0, err)
    if rc == 0:
        g = read_npz(path("g.npz"))
        names = layer_names(3)
        check("cond4x2: G holds y0, args (B, k) and the parameters",
              list(g) == ["y0", "args"] + names and g["args"][1] == (B, K), str(list(g)))
        ref, err = grad_ref(model, y0p, cotp, argp, ["t0=0", "t1=2", "save_t1=0", "save_steps=1"])
        check("cond4x2: grad_ref ran", ref is not None, err)
        compare_with_library("cond4x2", g, ref, names, inputs=True)
        first = open(path("g.npz"), "rb").read()
        rc, _, err = solve_grad(base + ["--out", path("outr.npz"), "--ragged"], cotp)
        check("cond4x2 --ragged: the padded cotangents give the same G bytes",
              rc == 0 and open(path("g.npz"), "rb").read() == first, err)
    bad = write("cotc_bad.npy", npy(cot[:B * (T - 1) * N], (B, T - 1, N)))
    rc, _, err = solve_grad(base, bad)
    check("cond4x2 --save steps: T - 1 slots refused after the solve, naming both shapes",
          rc == 2 and "(%d, %d, %d)" % (B, T - 1, N) in err and "(%d, %d, %d)" % (B, T, N) in err
          and not os.path.exists(path("g.npz")), err)
    model = os.path.join(MODELS, "node2x64v.safetensors")
    y0p = write("y0v.npy", npy([0.5, -0.25], (1, 2)))
    cotp = write("cotv.npy", npy([1.0, -2.0], (1, 1, 2)))
    rc, _, err = solve_grad(["--model", model, "--y0-file", y0p, "--precision", "fp64",
                             "--t1", "3"], cotp)
    g = read_npz(path("g.npz")) if rc == 0 else {}
    names = layer_names(3, scale=True)
    check("node2x64v fp64: G holds out_scale (2,)",
          rc == 0 and list(g) == ["y0"] + names and g["out_scale"][1] == (2,), err)
    if rc == 0:
        ref, err = grad_ref(model, y0p, cotp, None, ["t0=0", "t1=3", "precision=fp64"])
        compare_with_library("node2x64v fp64", g, ref, names)


def overflow_range(base, y0p, good, refused):
    """A cotangent finite in float64 but beyond float32's range (2^130): refused in an fp32 solve
    naming its index, by clnode-solve before the solve and by the library's reverse pass
    (grad_ref); in an fp64 solve it is a value like any other (2^130 times the cotangents gives
    exactly 2^130 times G: a power of two scales every value exactly)."""
    B, T, N = 2, 1, 10
    big = 2.0 ** 130
    over = write("cotbig.npy", npy([1.0] * 13 + [big] + [1.0] * 6, (B, T, N)))
    refused("fp32: a cotangent beyond float32's range (2^130) is refused naming its index",
            ["--cotangents", over, "--grad-out", path("gr.npz")], ["[1][0][3]", "fp32"])
    _, err = grad_ref("seed", y0p, over, None, ["t1=1"])
    check("fp32: the library's reverse pass refuses it too, naming trajectory, slot, component",
          "trajectory 1, slot 0, component 3" in err and "fp32" in err, err)
    scaled = write("cotscaled.npy", npy([big] * (B * T * N), (B, T, N)))
    g = {}
    for name, cot in (("ones", good), ("scaled", scaled)):
        rc, _, err = solve_grad(base[2:] + ["--precision", "fp64"], cot, "g64%s.npz" % name)
        g[name] = read_npz(path("g64%s.npz" % name)) if rc == 0 else None
        check("fp64: cotangents of %s are accepted (0)" % name, rc == 0, "rc %d: %s" % (rc, err))
    check("fp64: 2^130 times the cotangents gives exactly 2^130 times every array of G",
          None not in g.values() and all(
              bits(g["scaled"][k][2]) == bits([big * v for v in g["ones"][k][2]]) and
              any(v != 0 for v in g["ones"][k][2]) for k in g["ones"]))


def refusals():
    B, T, N = 2, 1, 10
    y0p = write("y0r.npy", npy([0.0] * (B * N), (B, N)))
    good = write("cotr.npy", npy([1.0] * (B * T * N), (B, T, N)))
    base = [SOLVE, "--quiet", "--y0-file", y0p, "--t1", "1"]

    def refused(label, args, words, out=path("gr.npz")):
        if os.path.exists(out):
            os.remove(out)
        rc, _, err = run(base + args)
        check(label, rc == 2 and all(w in err for w in words) and not os.path.exists(out),
              "rc %d: %s" % (rc, err))

    refused("--cotangents without --grad-out is refused naming --grad-out",
            ["--cotangents", good], ["--grad-out"])
    refused("--grad-out without --cotangents is refused naming --cotangents",
            ["--grad-out", path("gr.npz")], ["--cotangents"])
    wrong = write("cotw.npy", npy([1.0] * (B * 2 * N), (B, 2, N)))
    refused("a cotangent shape other than ys' is refused naming both shapes",
            ["--cotangents", wrong, "--grad-out", path("gr.npz")], ["(2, 2, 10)", "(2, 1, 10)"])
    flat = write("cotf.npy", npy([1.0] * (B * N), (B, N)))
    refused("cotangents of two dimensions are refused", [
            "--cotangents", flat, "--grad-out", path("gr.npz")], ["(2, 10)", "(2, 1, 10)"])
    nan = write("cotn.npy", npy([1.0] * 13 + [float("nan")] + [1.0] * 6, (B, T, N)))
    refused("a NaN cotangent is refused naming its index",
            ["--cotangents", nan, "--grad-out", path("gr.npz")], ["[1][0][3]", "finite"])
    inf = write_npz("cotinf.npz", {"ys": npy([float("inf")] + [1.0] * 19, (B, T, N))})
    refused("an infinite cotangent in a .npz is refused",
            ["--cotangents", inf, "--grad-out", path("gr.npz")], ["member ys", "[0][0][0]"])
    overflow_range(base, y0p, good, refused)
    extra = write_npz("cotx.npz", {"ys": npy([1.0] * 20, (B, T, N)), "ts": npy([1.0] * 2, (B, T))})
    refused("an npz member other than ys is refused naming it",
            ["--cotangents", extra, "--grad-out", path("gr.npz")], ["ts.npy"])
    goodz = write_npz("cotr.npz", {"ys": npy([1.0] * (B * T * N), (B, T, N))})
    before = open(goodz, "rb").read()
    refused("--grad-out naming --cotangents is refused",
            ["--cotangents", goodz, "--grad-out", goodz], ["--grad-out", "--cotangents"],
            out=goodz + ".missing")
    check("the cotangents file is untouched", open(goodz, "rb").read() == before)
    link = path("y0link.npz")  # a hard link to the y0 file: the same file by another name
    if not os.path.exists(link):
        os.link(y0p, link)
    refused("--grad-out naming --y0-file (through a hard link) is refused",
            ["--cotangents", good, "--grad-out", link], ["--grad-out", "--y0-file"],
            out=link + ".missing")
    refused("--out naming --cotangents is refused",
            ["--cotangents", good, "--grad-out", path("gr.npz"), "--out", good],
            ["--out", "--cotangents"])
    refused("--out and --grad-out the same path are refused",
            ["--cotangents", good, "--grad-out", path("gr.npz"), "--out", path("gr.npz")],
            ["--out", "--grad-out"])
    # the tape's options mean something only for the gradient: never silently ignored
    refused("--no-keep-tape with --cotangents/--grad-out is refused naming both",
            ["--no-keep-tape", "--cotangents", good, "--grad-out", path("gr.npz")],
            ["--no-keep-tape", "--cotangents", "tape"])
    refused("--checkpoint-every without --cotangents is refused naming it",
            ["--checkpoint-every", "3"], ["--checkpoint-every", "--cotangents"])
    refused("--keep-tape without --cotangents is refused naming it",
            ["--keep-tape"], ["--keep-tape", "--cotangents"])
    rc, _, err = run(base + ["--no-keep-tape"])
    check("--no-keep-tape alone (the default) is accepted", rc == 0, "rc %d: %s" % (rc, err))
    refused("--grad-out not a .npz is refused",
            ["--cotangents", good, "--grad-out", path("gr.npy")], ["FILE.npz"], out=path("gr.npy"))
    # under MPI (CLNODE_MPI=1 takes the MPI path in a tool built with MPI, here one rank): the
    # same bytes as one process (tests/mpi/test_mpi_solve.py runs 1..4 ranks)
    rc, _, err = run([SOLVE, "--resume", "--out", path("probe.npz"), "--t1", "0.1"],
                     env=dict(ENV, CLNODE_MPI="0"))
    if "built with MPI" in err:
        print("note: clnode-solve built without MPI; the MPI run is not compared", flush=True)
    else:
        got = {}
        for mpi in ("0", "1"):
            rc, _, err = run(base + ["--cotangents", good, "--grad-out", path("gr%s.npz" % mpi)],
                             env=dict(ENV, CLNODE_MPI=mpi))
            got[mpi] = open(path("gr%s.npz" % mpi), "rb").read() if rc == 0 else None
            check("--grad-out, CLNODE_MPI=%s: exit 0" % mpi, rc == 0, "rc %d: %s" % (rc, err))
        check("--grad-out under MPI: the bytes of one process",
              got["0"] is not None and got["0"] == got["1"])
    refused("--grad-out with a --chunk-size that is not whole blocks is refused",
            ["--cotangents", good, "--grad-out", path("gr.npz"), "--chunk-size", "3"],
            ["--chunk-size 3", "multiple of 32"])


seed_round_trip()
inputs_and_steps()
refusals()
print("%d check(s) failed" % len(FAILED) if FAILED else "every check passed")
sys.exit(1 if FAILED else 0)
