#!/usr/bin/env python3
"""test_cli.py - the command-line tools as an adversarial user drives them: every reproducer of a
bug once found in them gives a clean refusal (the documented exit status and a one-line message)
or the correct result, and the outputs are what Python reads directly.

    test_cli.py SOLVE COMPARE DEVICES [BENCH] [--sanitized]

--sanitized: the tools are built with AddressSanitizer, which reserves terabytes of address
space: the out-of-memory checks, which limit it, are skipped.

Standard library only (no numpy or pandas: their files are written literally). The plot is
checked only where matplotlib is importable. Exit status 0 when every check passes, 1 otherwise.
"""
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile

SANITIZED = "--sanitized" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--sanitized"]
SOLVE, COMPARE, DEVICES = map(os.path.abspath, ARGS[:3])
BENCH = os.path.abspath(ARGS[3]) if len(ARGS) > 3 else None
AS_LIMIT = None if SANITIZED else (resource.RLIMIT_AS, 1 << 30)
TMP = tempfile.mkdtemp(prefix="clnode-cli-")
FAILED = []
SEED_DIM = 10


def run(args, stdin=None, limit=None, timeout=300, cwd=None):
    """Runs a tool; returns (exit status, stdout, stderr). limit: (resource, bytes) set in the
    child (SIGXFSZ ignored, so that a write past RLIMIT_FSIZE fails with EFBIG)."""
    def pre():
        if limit:
            resource.setrlimit(limit[0], (limit[1], limit[1]))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    env = dict(os.environ)
    if limit:
        # OpenBLAS's worker threads retry a failed buffer allocation forever: one thread
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    p = subprocess.run(args, input=stdin, capture_output=True, timeout=timeout, cwd=cwd,
                       preexec_fn=pre if limit else None, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail))
    if not cond:
        FAILED.append(name)


def expect(name, res, status, err_has=None, out_has=None):
    rc, out, err = res
    ok = rc == status
    if err_has is not None:
        ok = ok and err_has in err
    if out_has is not None:
        ok = ok and out_has in out
    check(name, ok, "exit %d (want %d); stderr: %s; stdout: %s" % (rc, status, err.strip()[:600],
                                                                     out.strip()[:300]))
    return res


def write(name, data, mode="w"):
    path = os.path.join(TMP, name)
    with open(path, mode if isinstance(data, str) or mode != "w" else "wb") as f:
        f.write(data)
    return path


def solve_json(args):
    rc, out, err = run([SOLVE, "--json", "--t1", "0.5"] + args)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err


def y0_of(args):
    """The initial states a solve starts from, read back through --save t0 --json-points."""
    rc, d, err = solve_json(["--save", "t0", "--json-points"] + args)
    if rc != 0 or d is None:
        return rc, None, err
    return rc, [t["points"]["y"][0] for t in d["trajectories"]], err


ROW_A = [0.5, -0.25, 1.0, 0.0, 0.125, 2.0, -1.5, 0.75, 0.0625, 3.0]
ROW_B = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]


def csv_line(row, fmt="%r"):
    return ",".join(fmt % v for v in row)


# ---- 1. heap overflow: batch x dim wraps around ----
# (a batch past the library's limit, 2^31 - 1, is refused as such before any allocation)
expect("huge --batch is refused at the batch limit (2), no crash",
       run([SOLVE, "--batch", "1844674407370955162", "--y0", ",".join(["1"] * SEED_DIM)]), 2,
       err_has="in [1, 2147483647] (the batch limit)")
expect("--batch above LONG_MAX is bad input", run([SOLVE, "--batch", "99999999999999999999"]), 2,
       err_has="--batch expects an integer")

# ---- 1. the y0 reader ----
for bad in ("nan", "inf", "-inf", "NaN"):
    path = write("y0-%s.csv" % bad, "%s,%s\n%s\n" % (bad, csv_line(ROW_A[1:]), csv_line(ROW_B)))
    expect("a y0 row starting with %s is a (non-finite) state, refused, not dropped" % bad,
           run([SOLVE, "--y0-file", path, "--quiet"]), 2, err_has="is not finite")

path = write("y0-cr.csv", csv_line(ROW_A) + "\r" + csv_line(ROW_B) + "\r" + csv_line(ROW_A))
rc, ys, err = y0_of(["--y0-file", path])
check("CR-only line endings: every row read", rc == 0 and ys == [ROW_A, ROW_B, ROW_A],
      "exit %d, %s, %s" % (rc, ys, err))
path = write("y0-crlf.csv", csv_line(ROW_A) + "\r\n" + csv_line(ROW_B) + "\r\n")
rc, ys, err = y0_of(["--y0-file", path])
check("CRLF line endings", rc == 0 and ys == [ROW_A, ROW_B], "exit %d, %s, %s" % (rc, ys, err))

# pandas.DataFrame(y0).to_csv(f, index=False), written literally: labels 0..N-1, floats
pandas = ",".join(str(j) for j in range(SEED_DIM)) + "\n" + \
    csv_line(ROW_A) + "\n" + csv_line([float(v) for v in ROW_B]) + "\n"
path = write("y0-pandas.csv", pandas)
rc, ys, err = y0_of(["--y0-file", path])
check("pandas to_csv(index=False): exactly its rows", rc == 0 and ys == [ROW_A, ROW_B],
      "exit %d, %s, %s" % (rc, ys, err))
check("pandas labels: said on stderr", "pandas' column labels" in err, err)
rc, ys, err = y0_of(["--y0-file", path, "--y0-header", "no"])
check("--y0-header no reads the labels as a state",
      rc == 0 and ys is not None and len(ys) == 3 and ys[0] == list(map(float, range(SEED_DIM))),
      "exit %d, %s" % (rc, err))
# numpy.savetxt(f, y0, delimiter=","): %.18e, no header
path = write("y0-numpy.csv", "\n".join(",".join("%.18e" % v for v in r) for r in (ROW_A, ROW_B))
             + "\n")
rc, ys, err = y0_of(["--y0-file", path])
check("numpy.savetxt(delimiter=','): exactly its rows", rc == 0 and ys == [ROW_A, ROW_B],
      "exit %d, %s, %s" % (rc, ys, err))
path = write("y0-header.csv", "# states\n\n" + ",".join("x%d" % j for j in range(SEED_DIM)) +
             "\n" + csv_line(ROW_B) + "\n\n")
rc, ys, err = y0_of(["--y0-file", path])
check("a text header, comments and blank lines are skipped", rc == 0 and ys == [ROW_B],
      "exit %d, %s, %s" % (rc, ys, err))
path = write("y0-text-later.csv", csv_line(ROW_B) + "\n" + "a," + csv_line(ROW_B[1:]) + "\n")
expect("text after the first line is refused", run([SOLVE, "--y0-file", path, "--quiet"]), 2,
       err_has="line 2: field 1")
r = run([SOLVE, "--y0-file", "-", "--quiet"], stdin=(csv_line(ROW_A) + "\n").encode())
expect("--y0-file - reads stdin", r, 0)

# empty fields
expect("--y0 with an empty field is refused", run([SOLVE, "--y0", "0,,0,0,0,0,0,0,0,0,0"]), 2,
       err_has="field 2 is empty")
expect("--y0 with a trailing comma is refused", run([SOLVE, "--y0", ",".join(["0"] * 10) + ","]),
       2, err_has="field 11 is empty")
expect("--save ts: with an empty field is refused", run([SOLVE, "--save", "ts:1,,2"]), 2,
       err_has="field 2 is empty")
path = write("y0-empty-field.csv", "0,,0,0,0,0,0,0,0,0\n")
expect("a y0 file with an empty field is refused", run([SOLVE, "--y0-file", path]), 2,
       err_has="line 1: field 2 is empty")

# no line limit: a line of 100 KiB, and a dim-4096 model with its state on one line
long_line = ",".join("0.5" + "0" * 10000 for _ in range(SEED_DIM))
path = write("y0-long.csv", long_line + "\n")
rc, ys, err = y0_of(["--y0-file", path])
check("a 100 KiB y0 line is read", rc == 0 and ys == [[0.5] * SEED_DIM],
      "exit %d, %s" % (rc, err[:300]))


def safetensors(tensors, meta):
    """A safetensors file from {name: (shape, [float32 values])}."""
    header, data = {"__metadata__": meta}, b""
    for name, (shape, vals) in tensors.items():
        blob = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


D = 4096
model = write("wide.safetensors", safetensors({
    "layers.0.weight": ([1, D], [1.0 / D] * D), "layers.0.bias": ([1], [0.0]),
    "layers.1.weight": ([D, 1], [0.5] * D), "layers.1.bias": ([D], [0.0] * D)},
    {"activation": "tanh"}), "wb")
state = [((j * 37) % 101) / 101.0 for j in range(D)]
path = write("y0-wide.csv", ",".join("%.18e" % v for v in state) + "\n")
rc, d, err = solve_json(["--model", model, "--y0-file", path, "--t1", "0.1"])
check("a dim-4096 state on one line (more than 64 KiB) is read",
      rc == 0 and d is not None and d["dim"] == D and d["batch"] == 1, "exit %d, %s" % (rc, err))

# ---- 1. one device string ----
expect("--backend host --device bogus is refused by the library (host:bogus)",
       run([SOLVE, "--backend", "host", "--device", "bogus"]), 2, err_has="host:bogus")
expect("--device bogus is refused", run([SOLVE, "--device", "bogus"]), 2, err_has="bogus")
expect("--backend host --device host:openblas is host:openblas",
       run([SOLVE, "--backend", "host", "--device", "host:openblas", "--t1", "0.5"]), 0,
       out_has="OpenBLAS")
pocl = run([SOLVE, "--device", "opencl:pocl", "--t1", "0.5", "--quiet"], timeout=600)[0] == 0
if pocl:
    expect("--backend opencl --device opencl:pocl is accepted (the same device)",
           run([SOLVE, "--backend", "opencl", "--device", "opencl:pocl", "--t1", "0.5"],
               timeout=600), 0, out_has="Portable Computing Language")
    expect("--backend opencl --device pocl is opencl:pocl",
           run([SOLVE, "--backend", "opencl", "--device", "pocl", "--t1", "0.5"], timeout=600), 0,
           out_has="Portable Computing Language")
elif "opencl:pocl" in os.environ.get("CLNODE_REQUIRE_DEVICES", "").split(","):
    check("device opencl:pocl, required here (CLNODE_REQUIRE_DEVICES), is available", False,
          "clnode-solve --device opencl:pocl failed")
else:
    print("skip: no PoCL device (opencl:pocl)")

# ---- 1, 3. exit statuses ----
if AS_LIMIT:
    expect("out of memory in the tool exits 3",
           run([SOLVE, "--batch", "100000000"], limit=AS_LIMIT), 3, err_has="out of memory")
    expect("out of memory in the library exits 3",
           run([SOLVE, "--batch", "5000000"], limit=AS_LIMIT), 3, err_has="clnode-solve: ")
else:
    print("skip: out of memory under a sanitizer")
expect("--precision-guard refuse refusing the tolerance is bad input (2)",
       run([SOLVE, "--rtol", "1e-9", "--precision-guard", "refuse"]), 2, err_has="rtol 1e-09")
expect("an unsuccessful trajectory exits 1", run([SOLVE, "--max-steps", "3", "--quiet"]), 1)
expect("a successful solve exits 0", run([SOLVE, "--t1", "1", "--quiet"]), 0)
expect("fp64 with tf32 is bad input",
       run([SOLVE, "--precision", "fp64", "--gemm-precision", "tf32"]), 2)

# ---- 1, 4. outputs: no partial file, - is stdout ----
target = write("old.csv", "OLD\n")
r = run([SOLVE, "--batch", "64", "--save", "steps", "--out", target],
        limit=(resource.RLIMIT_FSIZE, 4096))
expect("a failed --out write exits 3", r, 3, err_has="cannot write " + target)
check("a failed --out write leaves the old file untouched", open(target).read() == "OLD\n",
      open(target).read()[:100])
leftovers = [f for f in os.listdir(TMP) if f.startswith(".old.csv")]
check("a failed --out write leaves no temporary file", not leftovers, str(leftovers))
expect("--out into a missing directory is an output that could not be written (3)",
       run([SOLVE, "--out", os.path.join(TMP, "no", "such", "dir.csv")]), 3,
       err_has="cannot write")
cwd = tempfile.mkdtemp(dir=TMP)
rc, out, err = run([SOLVE, "--t1", "1", "--out", "-"], cwd=cwd)
check("--out - writes the CSV on stdout (the summary on stderr), no file named -",
      rc == 0 and out.startswith("traj,kind,t,y0") and "trajectories succeeded" in err and
      not os.listdir(cwd), "exit %d, %s, %s" % (rc, out[:200], os.listdir(cwd)))
expect("an empty --out is refused", run([SOLVE, "--out", ""], cwd=cwd), 2, err_has="empty")
check("an empty --out leaves nothing behind", not os.listdir(cwd), str(os.listdir(cwd)))
expect("--json and --out - both on stdout are refused", run([SOLVE, "--json", "--out", "-"]), 2)
good = os.path.join(TMP, "good.csv")
rc, _, err = run([SOLVE, "--t1", "1", "--out", good, "--quiet"])
check("--out writes the file", rc == 0 and os.path.exists(good), err)


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


check("--out files get the umask's permissions",
      (os.stat(good).st_mode & 0o777) == (0o666 & ~_umask()), oct(os.stat(good).st_mode))

# ---- 1. models: the header length is checked before the file is read ----
expect("--model /dev/zero is refused at once (header length 0), not read whole",
       run([SOLVE, "--model", "/dev/zero"], limit=AS_LIMIT, timeout=30), 2,
       err_has="header length is 0")
big = os.path.join(TMP, "big.safetensors")
with open(big, "wb") as f:
    f.write(struct.pack("<Q", 1 << 40))
    f.truncate(2 << 30)  # sparse: 2 GiB
expect("a 2 GiB file with a bad header length is refused without reading it",
       run([SOLVE, "--model", big], limit=AS_LIMIT, timeout=30), 2,
       err_has="exceeds the limit")
with open(big, "wb") as f:
    f.write(struct.pack("<Q", 64))
    f.write(b"{")
expect("a header length past the end of the file is refused",
       run([SOLVE, "--model", big]), 2, err_has="runs past the end")
os.unlink(big)

# ---- 5. CSV kind column, order, shortest numbers; JSON points ----
rc, out, err = run([SOLVE, "--batch", "2", "--t1", "2", "--save", "t1", "--save", "steps",
                    "--save", "ts:0.02,1,2", "--save", "t0", "--out", "-"])
lines = out.strip().split("\n")
header = lines[0].split(",")
rows = [l.split(",") for l in lines[1:]]
check("CSV header traj,kind,t,y0..y9,result", header == ["traj", "kind", "t"] +
      ["y%d" % j for j in range(SEED_DIM)] + ["result"], str(header))
rank = {"t0": 0, "ts": 1, "step": 2, "t1": 3}
keys = [(int(r[0]), float(r[2]), rank.get(r[1], 9)) for r in rows]
# with steps saved the last step is the stop point: no t1 row (diffrax saves t1 once)
check("CSV rows sorted by trajectory, then time (t0, ts, step at equal times), no t1 with steps",
      rc == 0 and keys == sorted(keys) and all(r[1] in rank for r in rows) and
      [r[1] for r in rows if r[0] == "0"][0] == "t0" and
      [r[1] for r in rows if r[0] == "0"][-1] == "step" and
      not any(r[1] == "t1" for r in rows), "\n".join(lines[:8]))
check("float32 times print in their shortest form (0.02)",
      any(r[1] == "ts" and r[2] == "0.02" for r in rows) and
      all(len(v) <= 16 for r in rows for v in r[2:-1]), "\n".join(lines[:4]))
rc, out, err = run([SOLVE, "--t0", "1", "--t1", "0", "--dt0", "-0.02", "--save", "steps", "--save", "t0",
                    "--save", "t1", "--out", "-"])
ts = [float(l.split(",")[2]) for l in out.strip().split("\n")[1:]]
check("backward integration: rows in the direction of integration",
      rc == 0 and ts == sorted(ts, reverse=True) and ts[0] == 1.0 and ts[-1] == 0.0, str(ts))
rc, d, err = solve_json(["--batch", "2", "--save", "steps", "--save", "t1", "--json-points",
                         "--precision", "fp64"])
rc2, out, _ = run([SOLVE, "--json", "--t1", "0.5", "--batch", "2", "--save", "steps", "--save",
                   "t1", "--precision", "fp64", "--out", os.path.join(TMP, "pts.csv")])
csv_rows = [l.split(",") for l in open(os.path.join(TMP, "pts.csv")).read().split("\n")[1:] if l]
pts = [(str(b), k, t, y, tr["result"]) for b, tr in enumerate(d["trajectories"])
       for k, t, y in zip(tr["points"]["kind"], tr["points"]["t"], tr["points"]["y"])]
check("--json-points: the CSV's points, kinds, order and results, exactly (fp64)",
      rc == 0 and len(pts) == len(csv_rows) and
      all(p[0] == c[0] and p[1] == c[1] and p[2] == float(c[2]) and
          p[3] == [float(v) for v in c[3:-1]] and p[4] == c[-1] for p, c in zip(pts, csv_rows)),
      "%d points, %d CSV rows" % (len(pts), len(csv_rows)))
check("solve JSON carries format_version 1", d is not None and d.get("format_version") == 1, "")
expect("--json-points without --json is refused", run([SOLVE, "--json-points"]), 2)

# ---- 2. getopt_long, --help, --version, one message style ----
rc, a, _ = solve_json(["--rtol=1e-3", "--batch=2"])
rc2, b, _ = solve_json(["--rtol", "1e-3", "--batch", "2"])
check("--opt=value and --opt value are the same", a is not None and b is not None and
      a["rtol"] == b["rtol"] == 0.001 and a["batch"] == b["batch"] == 2, "")
tools = [("clnode-solve", SOLVE), ("clnode-compare", COMPARE), ("clnode-devices", DEVICES)]
if BENCH:
    tools.append(("clnode-bench", BENCH))
for name, exe in tools:
    rc, out, err = run([exe, "--help"])
    check("%s --help exits 0 and documents the exit statuses" % name,
          rc == 0 and "Exit status" in out and "4  a verification failed" in out, err)
    expect("%s --version" % name, run([exe, "--version"]), 0, out_has=name + " ")
    expect("%s: an unknown option is bad input, in the tool's voice" % name,
           run([exe, "--no-such-option"]), 2, err_has=name + ": unknown or ambiguous option")
    expect("%s: a stray argument is bad input" % name, run([exe, "stray"]), 2,
           err_has=name + ": unexpected argument")
for name, exe in tools[:2]:
    rc, out, err = run([exe, "--help"])
    check("%s --help documents the y0 file format" % name,
          "y0 file" in out and "\\r\\n" in out and "pandas" in out, out[:200])
# The device strings of every tool's --help are the library's (clnode_device_help): one table,
# the same in every tool, whose forms are those the library names when it refuses a string.
_, _, err = run([SOLVE, "--device", "no-such-backend", "--t1", "0.1"])
lib_forms = err.split("expected one of ", 1)[-1].split(" (clnode-devices", 1)[0].split(", ")
blocks = []
for name, exe in tools:
    out = run([exe, "--help"])[1]
    block = out.split("Device strings", 1)[-1].split("--backend B is a shorthand", 1)[0]
    blocks.append(block)
    table = [line.split()[0] for line in block.splitlines()[1:] if line.strip()]
    check("%s --help lists the device strings the library knows" % name,
          len(lib_forms) > 3 and all(f in table for f in lib_forms), "%s\nnot all of %s" % (
              block, lib_forms))
check("every tool prints the same device strings", len(set(blocks)) == 1, "")
expect("a missing value names the option", run([SOLVE, "--rtol"]), 2,
       err_has="clnode-solve: option --rtol needs a value")
expect("a value for a flag is refused", run([SOLVE, "--json=yes"]), 2,
       err_has="option --json=yes takes no value")
expect("-h is --help", run([SOLVE, "-h"]), 0, out_has="usage: clnode-solve")

# ---- clnode-devices ----
rc, out, err = run([DEVICES, "--no-probe", "--json"], timeout=600)
try:
    dj = json.loads(out)
except ValueError:
    dj = None
check("clnode-devices --json carries format_version 1",
      rc == 0 and dj is not None and dj.get("format_version") == 1, "exit %d, %s" % (rc, err))

# ---- 6. clnode-compare ----
rc, out, err = run([COMPARE, "--devices", "host", "--precisions", "fp32", "--gemm-modes",
                    "tf32", "--batches", "1,2,3"])
warn = [l for l in err.split("\n") if "warning:" in l]
check("clnode-compare: one warning line per row (three solves of a tf32 row)",
      rc == 0 and len(warn) == 1 and "host fp32 tf32" in warn[0] and "(3 times)" in warn[0],
      "exit %d; %s" % (rc, err))
rc, out, err = run([COMPARE, "--devices", "host", "--precisions", "fp32", "--gemm-modes",
                    "strict", "--tolerance", "1e-12", "--json"])
try:
    cj = json.loads(out)
except ValueError:
    cj = None
check("clnode-compare: a strict row that disagrees exits 4 (verification failed)",
      rc == 4 and cj is not None and cj["exit_status"] == 4 and cj["rows"][0]["fails"],
      "exit %d, %s" % (rc, err))
check("clnode-compare --json carries format_version 1",
      cj is not None and cj.get("format_version") == 1, "")
expect("clnode-compare: the reference not succeeding cannot be certified (4)",
       run([COMPARE, "--devices", "host", "--max-steps", "3"]), 4, err_has="reference")
expect("clnode-compare: --devices with an empty item is refused",
       run([COMPARE, "--devices", "host,,host"]), 2)
expect("clnode-compare: a device that names nothing is bad input",
       run([COMPARE, "--devices", "bogus"]), 2, err_has="bogus")
rc, out, err = run([COMPARE, "--version"])
check("clnode-compare in the build tree runs the source tree's plot script",
      rc == 0 and "plot script: " in out
      and out.strip().endswith("tools/clnode-compare/plot_compare.py") and
      os.path.exists(out.strip().split("plot script: ")[1]), out)

try:
    import matplotlib  # noqa: F401
    have_mpl = True
except ImportError:
    have_mpl = False
if have_mpl:
    png = os.path.join(TMP, "cmp.png")
    rc, out, err = run([COMPARE, "--devices", "host,host:openblas", "--plot", png], timeout=600)
    check("clnode-compare --plot writes the PNG", rc == 0 and
          open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "exit %d, %s" % (rc, err))
    pj = json.load(open(png + ".json"))
    rows = {r["label"]: r for r in pj["rows"]}
    ref = rows.get("host fp64 strict", {})
    check("the plot data: format_version 1, a deviation curve per row, zero for the reference",
          pj["format_version"] == 1 and
          all(len(r["rel_dev"]) == 401 for r in pj["rows"] if r["gemm_precision"] == "strict") and
          ref.get("is_reference") and max(ref["rel_dev"]) == 0, str(list(rows)))
    strict32 = rows.get("host fp32 strict", {})
    check("the plot data: fp32 strict deviates from the reference, below its tolerance",
          0 < max(strict32["rel_dev"]) < strict32["tolerance"] and
          strict32["steps_per_batch"] == [strict32["steps_per_batch"][0]] * 2, str(strict32)[:300])
else:
    print("skip: matplotlib is not installed (the plot is not checked)")

if BENCH:
    expect("clnode-bench: a batch that is no number is refused",
           run([BENCH, "--batches", "1,x"]), 2, err_has="clnode-bench:")
    expect("clnode-bench: a precision other than fp32 and fp64 is refused",
           run([BENCH, "--precision", "fp16"]), 2, err_has="clnode-bench: --precision")

print("%d check%s failed" % (len(FAILED), "" if len(FAILED) == 1 else "s") if FAILED
      else "every check passed")
sys.exit(1 if FAILED else 0)
