#!/usr/bin/env python3
"""test_cli_arrays.py - clnode-solve's binary arrays, end to end on the host:

  - per-trajectory inputs (--y0-file .npy, --t0-file, --t1-file, --dt0-file, --args-file, --in
    FILE.npz) give for every trajectory exactly the bytes of solving it alone (--batch 1 with
    scalar --y0/--t1/...), and so do each trajectory's own save times (--ts-file (B, T) against
    --save ts: with its row), whose times every output (npz, ragged, CSV, JSON) reports;
  - .npz/.npy outputs read back (a minimal reader of this file; numpy.load too when numpy is
    importable) hold the values of the CSV and JSON outputs, pass zipfile's CRC check, pad as
    diffrax pads (+inf), and the ragged form holds the same points;
  - the writer's forced-ZIP64 archive (test_npz --write) opens with zipfile and numpy.load;
  - malformed or mismatched inputs exit with status 2 and a message naming the file and the
    problem, and leave no output file behind.

    test_cli_arrays.py SOLVE TEST_NPZ

Standard library only; numpy is used for an extra check when importable. Exit status 0 when every
check passes, 1 otherwise.
"""
import ast
import json
import math
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import zipfile

SOLVE, TEST_NPZ = map(os.path.abspath, sys.argv[1:3])
TMP = tempfile.mkdtemp(prefix="clnode-arrays-")
FAILED = []
DIM = 10
try:
    import numpy
except ImportError:
    numpy = None


def run(args, timeout=300):
    p = subprocess.run(args, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail))
    if not cond:
        FAILED.append(name)


def path(name):
    return os.path.join(TMP, name)


# ---- .npy / .npz, written and read by hand ----

def npy(values, shape, dtype="<f8", header=None):
    """The bytes numpy.save writes for a flat list of values of that shape."""
    if header is None:
        sh = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, sh)
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    h = header + " " * pad + "\n"
    code = {"<f8": "<%dd", "<f4": "<%df", ">f8": ">%dd", "<i8": "<%dq"}[dtype]
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + \
        struct.pack(code % len(values), *values)


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)
    return path(name)


def npz(name, members, compress=False):
    with zipfile.ZipFile(path(name), "w",
                         zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for k, v in members.items():
            z.writestr(k + ".npy", v)
    return path(name)


def parse_npy(b):
    """(dtype, shape, flat values) of a .npy image: a reader independent of the tool's."""
    assert b[:6] == b"\x93NUMPY" and b[6] == 1, b[:8]
    hl = struct.unpack("<H", b[8:10])[0]
    d = ast.literal_eval(b[10:10 + hl].decode())
    assert not d["fortran_order"]
    n = 1
    for s in d["shape"]:
        n *= s
    code = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q"}[d["descr"]]
    vals = struct.unpack("<%d%s" % (n, code), b[10 + hl:])
    return d["descr"], tuple(d["shape"]), list(vals), b[10 + hl:]


def read_npz(p):
    with zipfile.ZipFile(p) as z:
        bad = z.testzip()
        assert bad is None, "CRC of %s" % bad
        for i in z.infolist():
            assert i.compress_type == zipfile.ZIP_STORED, i.filename
        return {i.filename[:-4]: parse_npy(z.read(i)) for i in z.infolist()}


def rows(vals, shape):
    """The first-dimension rows of a flat list."""
    per = len(vals) // shape[0] if shape[0] else 0
    return [vals[i * per:(i + 1) * per] for i in range(shape[0])]


# ---- a model with conditioning inputs: [y, c] -> 8 -> y, tanh ----

def safetensors(tensors, meta):
    header, data = {"__metadata__": meta}, b""
    for name, (shape, vals) in tensors.items():
        blob = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def pseudo(n, seed):
    out, x = [], seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append((x / (1 << 31) - 0.5) * 0.8)
    return out


N_C, K_C, H_C = 3, 2, 8
COND = write("cond.safetensors", safetensors({
    "layers.0.weight": ([H_C, N_C + K_C], pseudo(H_C * (N_C + K_C), 1)),
    "layers.0.bias": ([H_C], pseudo(H_C, 2)),
    "layers.1.weight": ([N_C, H_C], pseudo(N_C * H_C, 3)),
    "layers.1.bias": ([N_C], pseudo(N_C, 4))}, {"activation": "tanh", "inputs": str(K_C)}))


def f32(s):
    """A number printed by an fp32 solve (shortest float32 form), as the float32 it names."""
    return struct.unpack("<f", struct.pack("<f", float(s)))[0]


def fmt(x):
    return repr(float(x))


# ---- 1. every trajectory of a batch equals its solve alone, to the byte ----

B = 5
Y0 = [[0.05 * ((3 * b + j) % 7 - 3) for j in range(DIM)] for b in range(B)]
T0 = [0.0, 0.5, -0.25, 1.0, 0.0]
T1 = [3.0, 7.5, 1.0, 12.0, 0.0]  # the last: t0 == t1, no step
DT0 = [0.02, 0.05, 0.01, 0.1, 0.02]
y0f = write("y0.npy", npy([v for r in Y0 for v in r], (B, DIM), "<f4"))
t0f = write("t0.npy", npy(T0, (B,)))
t1f = write("t1.npy", npy(T1, (B,)))
dt0f = write("dt0.npy", npy(DT0, (B,)))
TS = [0.5, 1.0, 2.5]
# the y0 values as the solve sees them (float32 in the file)
Y0_32 = [[struct.unpack("<f", struct.pack("<f", v))[0] for v in r] for r in Y0]

for prec in ("fp32", "fp64"):
    for save in (["--save", "t1"], ["--save", "steps"],
                 ["--save", "t0", "--save", "ts:0.5,1,2.5", "--save", "t1"]):
        tag = "%s %s" % (prec, " ".join(save))
        out = path("batch.npz")
        rc, _, err = run([SOLVE, "--precision", prec, "--y0-file", y0f, "--t0-file", t0f,
                          "--t1-file", t1f, "--dt0-file", dt0f, "--quiet", "--out", out] + save)
        if rc != 0:
            check("batch solve " + tag, False, "exit %d: %s" % (rc, err))
            continue
        got = read_npz(out)
        same = True
        detail = ""
        for b in range(B):
            one = path("one.npz")
            # alone, the shared save times inside the trajectory's own interval: the batch's
            # row packs the same points (the library's layout), then pads
            inside = [j for j, t in enumerate(TS) if T0[b] <= t <= T1[b]]
            save_b = save if "ts:" not in " ".join(save) else \
                ["--save", "t0", "--save", "t1"] + (
                    ["--save", "ts:" + ",".join(fmt(TS[j]) for j in inside)] if inside else [])
            rc, _, err = run([SOLVE, "--precision", prec, "--batch", "1",
                              "--y0", ",".join(fmt(v) for v in Y0_32[b]), "--t0", fmt(T0[b]),
                              "--t1", fmt(T1[b]), "--dt0", fmt(DT0[b]), "--quiet", "--out", one]
                             + save_b)
            if rc != 0:
                same, detail = False, "alone %d: exit %d: %s" % (b, rc, err)
                break
            alone = read_npz(one)
            for k in ("num_steps", "num_accepted", "num_rejected", "result"):
                if got[k][2][b] != alone[k][2][0]:
                    same, detail = False, "traj %d %s %r != %r" % (b, k, got[k][2][b],
                                                                  alone[k][2][0])
            for k in ("ts", "ys"):
                dt, shape, vals, raw = got[k]
                adt, ashape, avals, araw = alone[k]
                per_b = len(raw) // shape[0]
                row = raw[b * per_b:(b + 1) * per_b]
                # the padded rows: the alone row's bytes, then +inf up to the batch's T
                if row[:len(araw)] != araw:
                    same, detail = False, "traj %d %s bytes differ from its solve alone" % (b, k)
                tail = rows(vals, shape)[b][len(avals):]
                if any(v != math.inf for v in tail):
                    same, detail = False, "traj %d %s padding is not +inf: %r" % (b, k, tail[:3])
        check("every trajectory of the batch is its solve alone, byte for byte (%s)" % tag, same,
              detail)

# ---- 2. conditioning inputs, from --args-file and from --in ----

BC = 4
YC = [[0.1 * (b - j) for j in range(N_C)] for b in range(BC)]
CC = [[0.3 * b - 0.2, 0.5 - 0.1 * b] for b in range(BC)]
T1C = [1.0, 2.0, 3.0, 4.0]
argsf = write("args.npy", npy([v for r in CC for v in r], (BC, K_C)))
y0c = write("y0c.npy", npy([v for r in YC for v in r], (BC, N_C)))
t1c = write("t1c.npy", npy(T1C, (BC,)))
common = ["--model", COND, "--precision", "fp64", "--rtol", "1e-8", "--atol", "1e-10", "--quiet",
          "--save", "steps"]
rc, _, err = run([SOLVE] + common + ["--y0-file", y0c, "--t1-file", t1c, "--args-file", argsf,
                                     "--out", path("c1.npz")])
check("--args-file with a model of 2 inputs", rc == 0, "exit %d: %s" % (rc, err))
inz = npz("in.npz", {"y0": npy([v for r in YC for v in r], (BC, N_C)), "t1": npy(T1C, (BC,)),
                     "args": npy([v for r in CC for v in r], (BC, K_C))})
rc, _, err = run([SOLVE] + common + ["--in", inz, "--out", path("c2.npz")])
check("--in FILE.npz with y0, t1 and args", rc == 0, "exit %d: %s" % (rc, err))
if rc == 0:
    a, b2 = read_npz(path("c1.npz")), read_npz(path("c2.npz"))
    check("--in gives the bytes of the separate files",
          all(a[k][3] == b2[k][3] for k in a), "members differ")
    ok, detail = True, ""
    for b in range(BC):
        one = path("c-one.npz")
        write("args1.npy", npy(CC[b], (1, K_C)))
        rc, _, err = run([SOLVE] + common + ["--y0", ",".join(fmt(v) for v in YC[b]), "--t1",
                                             fmt(T1C[b]), "--args-file", path("args1.npy"),
                                             "--out", one])
        alone = read_npz(one)
        for k in ("ts", "ys"):
            dt, shape, vals, raw = a[k]
            per_b = len(raw) // shape[0]
            if raw[b * per_b:b * per_b + len(alone[k][3])] != alone[k][3]:
                ok, detail = False, "traj %d %s" % (b, k)
    check("conditioned trajectories equal their solves alone, byte for byte", ok, detail)
    finals = [rows(a["ys"][2], a["ys"][1])[b] for b in range(BC)]
    check("the conditioning inputs change the solution",
          len(set(tuple(f[:N_C]) for f in finals)) == BC)

# ---- 3. .npz / .npy / ragged against the CSV and JSON outputs ----

base = [SOLVE, "--y0-file", y0f, "--t1-file", t1f, "--t0-file", t0f, "--save", "steps",
        "--quiet"]
rc1 = run(base + ["--out", path("p.npz")])[0]
rc2 = run(base + ["--out", path("r.npz"), "--ragged"])[0]
rc3 = run(base + ["--out", path("p.npy")])[0]
rc4 = run(base + ["--out", path("p.csv")])[0]
rc5, js, err = run([a for a in base if a != "--quiet"] + ["--json", "--json-points"])
check("padded, ragged, .npy, CSV and JSON outputs written",
      (rc1, rc2, rc3, rc4, rc5) == (0, 0, 0, 0, 0), "exits %r: %s" % ((rc1, rc2, rc3, rc4, rc5),
                                                                      err))
if (rc1, rc2, rc3, rc4, rc5) == (0, 0, 0, 0, 0):
    p, r = read_npz(path("p.npz")), read_npz(path("r.npz"))
    with open(path("p.npy"), "rb") as f:
        y_npy = parse_npy(f.read())
    doc = json.loads(js)
    csv = {}
    with open(path("p.csv")) as f:
        next(f)
        for line in f:
            c = line.strip().split(",")
            csv.setdefault(int(c[0]), []).append([f32(v) for v in c[2:-1]])  # t, y (not result)
    T = p["ts"][1][1]
    check("padded: T is the largest number of saved points",
          T == max(len(v) for v in csv.values()) and p["ys"][1] == (B, T, DIM),
          "T %d, shape %r" % (T, p["ys"][1]))
    check(".npy holds the .npz's ys, same dtype and bytes",
          y_npy[0] == "<f4" and y_npy[1] == p["ys"][1] and y_npy[3] == p["ys"][3])
    check("format_version 2, result int32, counts int64",
          p["format_version"][:3] == ("<i8", (), [2]) and p["result"][0] == "<i4"
          and p["num_steps"][0] == "<i8")
    ok, detail = True, ""
    off = r["offsets"][2]
    check("ragged: offsets (B+1,) from 0 to P",
          r["offsets"][1] == (B + 1,) and off[0] == 0 and off[-1] == r["ts"][1][0]
          and r["ys"][1] == (off[-1], DIM), "offsets %r" % off)
    for b in range(B):
        pts = csv.get(b, [])
        jt = doc["trajectories"][b]
        prow_t = rows(p["ts"][2], p["ts"][1])[b]
        prow_y = rows(p["ys"][2], p["ys"][1])[b]
        for k, pt in enumerate(pts):
            t, y = pt[0], pt[1:]
            if prow_t[k] != t or prow_y[k * DIM:(k + 1) * DIM] != y:
                ok, detail = False, "traj %d point %d: npz (%r) != csv (%r)" % (b, k, prow_t[k], t)
            if f32(jt["points"]["t"][k]) != t or [f32(v) for v in jt["points"]["y"][k]] != y:
                ok, detail = False, "traj %d point %d: json != csv" % (b, k)
            q = off[b] + k
            if r["ts"][2][q] != t or r["ys"][2][q * DIM:(q + 1) * DIM] != y:
                ok, detail = False, "traj %d point %d: ragged != csv" % (b, k)
        if off[b + 1] - off[b] != len(pts):
            ok, detail = False, "traj %d: %d ragged points, %d in the CSV" % (
                b, off[b + 1] - off[b], len(pts))
        if p["num_steps"][2][b] != jt["num_steps"] or p["result"][2][b] != 0 \
                or jt["t1"] != T1[b] or jt["t0"] != T0[b]:
            ok, detail = False, "traj %d: stats or interval differ from the JSON" % b
    check("npz (padded and ragged) values equal the CSV and JSON values", ok, detail)
    check("JSON: per-trajectory t0/t1 in each entry, null at the top",
          doc["t1"] is None and doc["t0"] is None and doc["dt0"] is not None)
    if numpy is not None:
        d = numpy.load(path("p.npz"))
        check("numpy.load reads the .npz (padded)",
              d["ys"].shape == (B, T, DIM) and d["ys"].dtype == numpy.float32
              and bool(numpy.isinf(d["ts"][B - 1]).all()) and int(d["format_version"]) == 2)
        rr = numpy.load(path("r.npz"))
        o = rr["offsets"]
        check("numpy: ragged rows equal the padded rows",
              all(numpy.array_equal(rr["ys"][o[b]:o[b + 1]], d["ys"][b, :o[b + 1] - o[b]])
                  for b in range(B)))

# ---- 4. the writer's forced ZIP64 records open with zipfile and numpy ----

rc = subprocess.run([TEST_NPZ, "--write", TMP]).returncode
if rc == 0:
    ok = True
    for name in ("plain.npz", "zip64.npz"):
        with zipfile.ZipFile(path(name)) as z:
            ok = ok and z.testzip() is None
    with open(path("zip64.npz"), "rb") as f:
        raw = f.read()
    check("the forced-ZIP64 archive has ZIP64 end records and passes zipfile's CRC check",
          ok and b"PK\x06\x06" in raw and b"PK\x06\x07" in raw)
    a, b2 = read_npz(path("plain.npz")), read_npz(path("zip64.npz"))
    check("ZIP64 and plain archives hold the same members", all(a[k][3] == b2[k][3] for k in a))
    if numpy is not None:
        z, pl = numpy.load(path("zip64.npz")), numpy.load(path("plain.npz"))
        check("numpy.load reads the forced-ZIP64 archive",
              all(numpy.array_equal(z[k], pl[k]) for k in pl.files) and len(pl.files) == 5)
else:
    check("test_npz --write", False, "exit %d" % rc)

# ---- 5. refusals: exit status 2, a message naming the file and the problem ----


def refused(name, args, needle, status=2):
    out = path("refused.npz")
    before = sorted(os.listdir(TMP))
    rc, _, err = run([SOLVE, "--quiet", "--out", out] + args)
    after = sorted(os.listdir(TMP))
    check(name, rc == status and needle in err and not os.path.exists(out) and before == after,
          "exit %d, stderr %r, left %r" % (rc, err.strip(), sorted(set(after) - set(before))))


refused("t1 with 3 trajectories against y0 with 5",
        ["--y0-file", y0f, "--t1-file", write("t1-3.npy", npy([1, 2, 3], (3,)))],
        "t1-3.npy holds 3 trajectories, but %s 5" % y0f)
refused("t0 and t1 of different lengths",
        ["--t0-file", t0f, "--t1-file", write("t1-3b.npy", npy([1, 2, 3], (3,)))],
        "t1-3b.npy: t1 holds 3 trajectories, but %s holds 5" % t0f)
refused("--batch against the arrays", ["--batch", "2", "--t1-file", t1f],
        "holds 5 trajectories, but --batch is 2")
refused("y0 of the wrong dimension",
        ["--y0-file", write("y0-9.npy", npy([0.0] * 18, (2, 9)))],
        "y0 of shape (2, 9), but the model's state has 10 components")
refused("t1 of shape (B, 1)", ["--t1-file", write("t1-2d.npy", npy([1.0, 2.0], (2, 1)))],
        "t1 of shape (2, 1): one value per trajectory, (B,), expected")
refused("NaN in t1", ["--t1-file", write("t1-nan.npy", npy([1.0, float("nan")], (2,)))],
        "t1-nan.npy: t1[1] is nan: every value must be finite")
refused("inf in y0", ["--y0-file", write("y0-inf.npy", npy([0.0] * 9 + [math.inf], (DIM,)))],
        "y0[0][9] is inf")
refused("a scalar --t1 with --t1-file", ["--t1", "3", "--t1-file", t1f],
        "give either --t1 or --t1-file, not both")
refused("a scalar --dt0 with --dt0-file", ["--dt0-file", dt0f, "--dt0", "0.1"],
        "give either --dt0 or --dt0-file, not both")
refused("args for a model without inputs", ["--args-file", argsf],
        "the model takes no conditioning inputs")
refused("args of the wrong width",
        ["--model", COND, "--args-file", write("args3.npy", npy([0.0] * 6, (2, 3)))],
        "args of shape (2, 3), but the model takes 2 conditioning inputs: (B, 2) expected")
refused("a model with inputs and no args", ["--model", COND],
        "the model takes 2 conditioning inputs: give them with --args-file")
refused("an unknown member in --in",
        ["--in", npz("unknown.npz", {"t1": npy([1.0], (1,)), "tl": npy([1.0], (1,))})],
        "unknown.npz: unknown member tl.npy")
refused("a compressed --in (numpy.savez_compressed)",
        ["--in", npz("deflated.npz", {"t1": npy([1.0] * 50, (50,))}, compress=True)],
        "is compressed (method 8; numpy.savez_compressed): save it with numpy.savez")
refused("an --in member and the same file option",
        ["--in", npz("t1only.npz", {"t1": npy([1.0], (1,))}), "--t1-file", t1f],
        "t1 is given twice (the member t1 and --t1-file)")
refused("an --in member t1 and a scalar --t1",
        ["--in", path("t1only.npz"), "--t1", "2"], "t1 is given twice (the member t1 and --t1)")
refused("an --in y0 and --y0", ["--in", npz("y0only.npz", {"y0": npy([0.0] * DIM, (DIM,))}),
                                "--y0", ",".join(["0"] * DIM)], "y0 is given twice")
refused("a malformed member in --in",
        ["--in", npz("bigend.npz", {"t1": npy([1.0], (1,), ">f8")})],
        "bigend.npz member t1: dtype '>f8' is big-endian")
refused("big-endian t1", ["--t1-file", write("t1-be.npy", npy([1.0], (1,), ">f8"))],
        "t1-be.npy: dtype '>f8' is big-endian")
refused("Fortran-order y0", ["--y0-file", write("y0-f.npy", npy(
    [0.0] * DIM, (1, DIM), header="{'descr': '<f8', 'fortran_order': True, 'shape': (1, 10), }"))],
    "the array is in Fortran order")
refused("a .npy name without the magic", ["--y0-file", write("text.npy", b"0,0,0\n")],
        "text.npy: not a .npy file")
refused("an integer t1", ["--t1-file", write("t1-int.npy", npy([1], (1,), "<i8"))],
        "dtype '<i8' is not supported")
refused("truncated data", ["--t1-file", write("t1-short.npy", npy([1.0, 2.0], (2,))[:-3])],
        "13 bytes of data, but the shape needs 16")
refused("a damaged --in member (CRC)",
        ["--in", write("crc.npz", open(npz("crc0.npz", {"t1": npy([1.0, 2.0], (2,))}), "rb")
                       .read().replace(struct.pack("<d", 2.0), struct.pack("<d", 3.0)))],
        "member t1.npy: CRC-32 mismatch")
refused("mixed directions", ["--t1-file", write("t1-mixed.npy", npy([1.0, -1.0], (2,)))],
        "direction")
rc, _, err = run([SOLVE, "--ragged", "--out", path("x.csv")])
check("--ragged without .npz output is refused", rc == 2 and "--ragged needs --out FILE.npz" in err,
      "exit %d: %s" % (rc, err))

# an existing output survives a refused run untouched
keep = write("keep.npz", b"previous")
rc, _, err = run([SOLVE, "--t1-file", path("t1-nan.npy"), "--out", keep])
check("a refused run leaves an existing output untouched",
      rc == 2 and open(keep, "rb").read() == b"previous", "exit %d" % rc)

# a write that fails midway (file size limit): exit 3, no file left, the old one untouched
def small_files():
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


before = sorted(os.listdir(TMP))
p = subprocess.run([SOLVE, "--batch", "500", "--save", "steps", "--quiet", "--out", keep],
                   capture_output=True, preexec_fn=small_files, timeout=300)
err = p.stderr.decode()
check("a failed .npz write exits 3, leaves no partial file and the old one untouched",
      p.returncode == 3 and "cannot write %s" % keep in err and sorted(os.listdir(TMP)) == before
      and open(keep, "rb").read() == b"previous", "exit %d: %s" % (p.returncode, err))

# ---- 6. each trajectory its own save times (--ts-file (B, T)) ----

TSR = [[0.0, 1.0, 1.0, 2.5], [0.5, 2.0, 7.5, 7.5], [-0.25, 0.0, 0.5, 1.0], [1.0, 4.0, 8.0, 12.0],
       [0.0, 0.0, 0.0, 0.0]]  # each inside its own [T0[b], T1[b]]; the last t0 == t1
tsf = write("ts-rows.npy", npy([v for r in TSR for v in r], (B, 4)))
tsf32 = write("ts-rows32.npy", npy([v for r in TSR for v in r], (B, 4), "<f4"))
per_traj = ["--y0-file", y0f, "--t0-file", t0f, "--t1-file", t1f, "--dt0-file", dt0f]
for prec, tsfile in (("fp32", tsf), ("fp64", tsf), ("fp64", tsf32)):
    for extra in ([], ["--save", "t0", "--save", "steps", "--save", "t1"]):
        tag = "%s %s %s" % (prec, os.path.basename(tsfile), " ".join(extra))
        out = path("rows.npz")
        rc, _, err = run([SOLVE, "--precision", prec, "--quiet", "--out", out, "--ts-file",
                          tsfile] + per_traj + extra)
        if rc != 0:
            check("--ts-file solve " + tag, False, "exit %d: %s" % (rc, err))
            continue
        got = read_npz(out)
        same, detail = True, ""
        for b in range(B):
            one = path("rows-one.npz")
            rc, _, err = run([SOLVE, "--precision", prec, "--batch", "1",
                              "--y0", ",".join(fmt(v) for v in Y0_32[b]), "--t0", fmt(T0[b]),
                              "--t1", fmt(T1[b]), "--dt0", fmt(DT0[b]), "--quiet", "--out", one,
                              "--save", "ts:" + ",".join(fmt(t) for t in TSR[b])] + extra)
            if rc != 0:
                same, detail = False, "alone %d: exit %d: %s" % (b, rc, err)
                break
            alone = read_npz(one)
            for k in ("num_steps", "num_accepted", "result"):
                if got[k][2][b] != alone[k][2][0]:
                    same, detail = False, "traj %d %s differs" % (b, k)
            for k in ("ts", "ys"):
                raw, araw = got[k][3], alone[k][3]
                per_b = len(raw) // got[k][1][0]
                if raw[b * per_b:b * per_b + len(araw)] != araw:
                    same, detail = False, "traj %d %s bytes differ from its solve alone" % (b, k)
            if not extra and rows(got["ts"][2], got["ts"][1])[b] != [f32(t) if prec == "fp32"
                                                                    else t for t in TSR[b]]:
                same, detail = False, "traj %d: ts %r, its row %r" % (
                    b, rows(got["ts"][2], got["ts"][1])[b], TSR[b])
        check("--ts-file: every trajectory is its solve alone with its row as --save ts: (%s)"
              % tag, same, detail)

# the CSV, JSON and ragged outputs hold each trajectory's own times
rc1 = run([SOLVE, "--quiet", "--ts-file", tsf, "--out", path("rows.csv")] + per_traj)[0]
rc2, js, _ = run([SOLVE, "--json", "--json-points", "--ts-file", tsf] + per_traj)
rc3 = run([SOLVE, "--quiet", "--ts-file", tsf, "--ragged", "--out", path("rows-r.npz")]
          + per_traj)[0]
if (rc1, rc2, rc3) == (0, 0, 0):
    csv_t = {}
    with open(path("rows.csv")) as f:
        next(f)
        for line in f:
            c = line.strip().split(",")
            csv_t.setdefault(int(c[0]), []).append((c[1], f32(c[2])))
    doc = json.loads(js)
    r = read_npz(path("rows-r.npz"))
    off = r["offsets"][2]
    ok = all(csv_t[b] == [("ts", t) for t in TSR[b]]
             and [f32(t) for t in doc["trajectories"][b]["points"]["t"]] == TSR[b]
             and r["ts"][2][off[b]:off[b + 1]] == TSR[b] for b in range(B))
    check("--ts-file: CSV, JSON and ragged points are each trajectory's own times", ok,
          "csv %r" % csv_t)
else:
    check("--ts-file: CSV, JSON and ragged outputs written", False, "exits %r" % ((rc1, rc2, rc3),))
if numpy is not None and rc3 == 0:
    rc = run([SOLVE, "--quiet", "--ts-file", tsf, "--out", path("rows-p.npz")] + per_traj)[0]
    d = numpy.load(path("rows-p.npz"))
    check("numpy.load: ts is the (B, T) rows of --ts-file",
          rc == 0 and numpy.array_equal(d["ts"], numpy.array(TSR, dtype=numpy.float32)))

refused("--ts-file of shape (T,)", ["--ts-file", write("ts-1d.npy", npy([0.0, 1.0], (2,)))],
        "ts-1d.npy: ts of shape (2,): each trajectory's save times, (B, T) with T >= 1")
refused("--ts-file with no column", ["--ts-file", write("ts-0.npy", npy([], (2, 0)))],
        "ts-0.npy: ts of shape (2, 0)")
refused("--ts-file of 3 rows against 5 trajectories",
        ["--ts-file", write("ts-3.npy", npy([0.0] * 6, (3, 2)))] + per_traj,
        "ts-3.npy: ts holds 3 trajectories, but %s holds 5" % t0f)
refused("--ts-file rows against --batch", ["--batch", "2", "--ts-file", tsf],
        "holds 5 trajectories, but --batch is 2")
refused("--ts-file with --save ts:", ["--ts-file", tsf, "--save", "ts:1"] + per_traj,
        "give either --save ts:LIST (one list of save times shared by the batch) or --ts-file")
refused("--ts-file with a NaN",
        ["--ts-file", write("ts-nan.npy", npy([0.0, float("nan"), 0.0, 1.0], (2, 2)))],
        "ts-nan.npy: ts[0][1] is nan: every value must be finite")
refused("--ts-file of integers", ["--ts-file", write("ts-int.npy", npy([0, 1], (1, 2), "<i8"))],
        "ts-int.npy: dtype '<i8' is not supported")
bad = [list(r) for r in TSR]
bad[3][2] = 2.0  # before its time 1 (4.0)
refused("--ts-file with a row out of order",
        ["--ts-file", write("ts-order.npy", npy([v for r in bad for v in r], (B, 4)))] + per_traj,
        "time 2 of trajectory 3 = 2 after 4")
bad = [list(r) for r in TSR]
bad[1][0] = 0.25  # trajectory 1 starts at 0.5
refused("--ts-file with a time outside its trajectory's interval",
        ["--ts-file", write("ts-out.npy", npy([v for r in bad for v in r], (B, 4)))] + per_traj,
        "save time 0 of trajectory 1 (0.25) lies outside its trajectory's interval")
refused("--ts-file and an --in member ts",
        ["--in", npz("ts-in.npz", {"ts": npy([0.0, 1.0], (1, 2))}), "--ts-file", tsf],
        "ts is given twice (the member ts and --ts-file)")

print("%d failed" % len(FAILED) if FAILED else "all passed")
sys.exit(1 if FAILED else 0)
