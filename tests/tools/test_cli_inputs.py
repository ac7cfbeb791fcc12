#!/usr/bin/env python3
"""test_cli_inputs.py - the command-line tools read what users give them exactly, boundedly, and
say the right thing: one regression per input bug once found in them (a typo'd first CSV line
dropped as a header, repeated --save ts keeping only the last, options of clnode-compare
silently ignored, misspelt model metadata ignored, endless inputs read until memory ran out, a
failed trajectory's CSV rows not saying so, messages naming the wrong cause).

    test_cli_inputs.py SOLVE COMPARE DEVICES [--sanitized]

--sanitized: the tools are built with AddressSanitizer, which reserves terabytes of address
space: the reads of endless inputs then run without an address-space limit (still bounded by
a timeout). Standard library only: .npy, .npz and safetensors files are written literally.
Exit status 0 when every check passes, 1 otherwise.
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import zipfile

SANITIZED = "--sanitized" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--sanitized"]
SOLVE, COMPARE, DEVICES = map(os.path.abspath, ARGS[:3])
# an endless input read whole would exhaust this, and be ended as "out of memory"
AS_LIMIT = None if SANITIZED else 1 << 30
TMP = tempfile.mkdtemp(prefix="clnode-cli-inputs-")
FAILED = []
DIM = 10  # the seed model's state


def run(args, stdin=None, feed=None, timeout=120):
    """Runs a tool under the address-space limit; returns (exit status, stdout, stderr). stdin:
    bytes; feed: a generator of byte blocks written to the tool's stdin until it stops reading
    (an endless pipe)."""
    def pre():
        if AS_LIMIT:
            resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=pre, env=env)
    pipe, p.stdin = p.stdin, None  # written here, not by communicate

    def writer():
        try:
            if stdin is not None:
                pipe.write(stdin)
            for block in feed or ():
                pipe.write(block)
        except (BrokenPipeError, OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except (BrokenPipeError, OSError):
                pass
    threading.Thread(target=writer, daemon=True).start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return -999, out.decode("utf-8", "replace"), "timed out: " + err.decode("utf-8", "replace")
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def endless(block):
    while True:
        yield block


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail))
    if not cond:
        FAILED.append(name)


def expect(name, res, status, err_has=None, out_has=None):
    rc, out, err = res
    ok = rc == status and (err_has is None or err_has in err) and \
        (out_has is None or out_has in out)
    check(name, ok, "exit %d (want %d); stderr: %s; stdout: %s" % (rc, status, err.strip()[:600],
                                                                     out.strip()[:300]))
    return res


def path(name):
    return os.path.join(TMP, name)


def write(name, data):
    with open(path(name), "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path(name)


def npy(values, shape):
    """numpy.save's bytes of a float64 array (version 1.0, header padded to 64 bytes)."""
    d = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        "%d," % shape[0] if len(shape) == 1 else ", ".join(map(str, shape)))
    total = (10 + len(d) + 1 + 63) // 64 * 64
    h = d + " " * (total - 10 - len(d) - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + \
        struct.pack("<%dd" % len(values), *values)


def npz(members):
    """numpy.savez's archive of {name: npy bytes} (stored members)."""
    p = path("tmp-build.npz")
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name + ".npy", data)
    with open(p, "rb") as f:
        data = f.read()
    os.unlink(p)
    return data


def safetensors(tensors, meta):
    """A safetensors file from {name: (shape, [float32 values])} and string metadata."""
    header, data = {"__metadata__": meta}, b""
    for name, (shape, vals) in tensors.items():
        blob = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def solve_json(args):
    rc, out, err = run([SOLVE, "--json", "--json-points", "--t1", "0.5"] + args)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err


ROW = [0.5, -0.25, 1.0, 0.0, 0.125, 2.0, -1.5, 0.75, 0.0625, 3.0]
CSV_ROW = ",".join(repr(v) for v in ROW)

# ---- a typo in the first CSV line is no header ----
p = write("typo.csv", "0,1,2,3,4,5,6,7,9,1O\n" + CSV_ROW + "\n")
expect("a first CSV line mixing numbers with a typo is refused, naming line 1 and the token",
       run([SOLVE, "--y0-file", p, "--quiet"]), 2,
       err_has='line 1: field 10, "1O", is not a number')
rc, d, err = solve_json(["--y0-file", p, "--y0-header", "yes", "--save", "t0"])
check("--y0-header yes still takes that line for a header",
      rc == 0 and d is not None and d["batch"] == 1 and
      d["trajectories"][0]["points"]["y"][0] == ROW, "exit %d, %s" % (rc, err))
p = write("header.csv", ",".join("x%d" % j for j in range(DIM)) + "\n" + CSV_ROW + "\n")
rc, d, err = solve_json(["--y0-file", p, "--save", "t0"])
check("a first line of names only is still a header",
      rc == 0 and d is not None and d["batch"] == 1, "exit %d, %s" % (rc, err))

# ---- --save is repeatable: ts lists accumulate ----
rc, d, err = solve_json(["--save", "ts:0.1", "--save", "ts:0.2,0.3"])
check("--save ts:0.1 --save ts:0.2,0.3 saves at all three times",
      rc == 0 and d is not None and d["trajectories"][0]["points"]["t"] == [0.1, 0.2, 0.3],
      "exit %d, %s %s" % (rc, d and d["trajectories"][0]["points"]["t"], err))
rc1, d1, _ = solve_json(["--save", "ts:0.1,0.2", "--save", "t1"])
rc2, d2, _ = solve_json(["--save", "ts:0.1", "--save", "t1", "--save", "ts:0.2", "--save", "t1"])
check("repeated --save t1 and split ts lists: the same solve as one list",
      rc1 == 0 and rc2 == 0 and d1["trajectories"] == d2["trajectories"], "")

# ---- clnode-compare refuses what it does not take ----
for what in ("steps", "t0", "t1"):
    expect("clnode-compare --save %s is refused, named" % what,
           run([COMPARE, "--devices", "host", "--batches", "1", "--precisions", "fp64",
                "--gemm-modes", "strict", "--no-sensitivity", "--t1", "0.5", "--save", what]), 2,
           err_has="--save %s is not an option of clnode-compare" % what)

# ---- model metadata: misspelt keys refused, other keys kept and shown ----
two = {"layers.0.weight": ([DIM, DIM], [0.01] * DIM * DIM), "layers.0.bias": ([DIM], [0.0] * DIM),
       "layers.1.weight": ([DIM, DIM], [0.02] * DIM * DIM)}
for key, known in (("final_activaton", "final_activation"),
                   ("Final_activation", "final_activation"), ("time-input", "time_input")):
    m = write("typo-%s.safetensors" % key, safetensors(two, {"activation": "tanh", key: "tanh"}))
    expect("model metadata key %r is refused, naming %r" % (key, known),
           run([SOLVE, "--model", m, "--quiet"]), 2,
           err_has="__metadata__ key '%s' is not one clnode reads, but resembles \"%s\"" %
           (key, known))
m = write("typo-space.safetensors", safetensors(two, {"activation ": "tanh"}))
expect("model metadata key 'activation ' is refused", run([SOLVE, "--model", m, "--quiet"]), 2,
       err_has="key 'activation ' is not one clnode reads, but resembles \"activation\"")
m = write("kept.safetensors", safetensors(two, {"activation": "tanh", "format": "pt",
                                                "final_activation": "softplus",
                                                "trained_by": "someone"}))
rc, out, err = run([DEVICES, "--model", m])
check("clnode-devices --model prints layers, shapes, dtypes, activations, every metadata key",
      rc == 0 and "layer 0: weight (10, 10) F32, bias (10,) F32" in out and
      "layer 1: weight (10, 10) F32, no bias" in out and
      "activation tanh, final activation softplus" in out and '"format": "pt"' in out and
      '"trained_by": "someone"' in out and "no time" in out, "exit %d: %s %s" % (rc, out, err))
rc, out, err = run([DEVICES, "--model", m, "--json"])
try:
    doc = json.loads(out)
except ValueError:
    doc = None
check("clnode-devices --model --json: the same as one object",
      rc == 0 and doc is not None and doc["metadata"] == {
          "activation": "tanh", "format": "pt", "final_activation": "softplus",
          "trained_by": "someone"} and doc["layers"][1]["bias"] is None and
      doc["layers"][0]["weight"] == {"shape": [10, 10], "dtype": "F32"} and
      doc["time_input"] is False and doc["inputs"] == 0, "exit %d: %s %s" % (rc, out, err))
# ---- a model with an output scale: y' = 0.5 * (-y), y(t) = y0 exp(-t / 2) ----
eye = [-1.0 if i == j else 0.0 for i in range(DIM) for j in range(DIM)]
m = write("scaled.safetensors", safetensors({"layers.0.weight": ([DIM, DIM], eye),
                                             "out_scale": ([], [0.5])}, {}))
rc, out, err = run([DEVICES, "--model", m])
check("clnode-devices --model prints the output scale",
      rc == 0 and "output scale: 0.5 (1 value: one for every component, F32)" in out,
      "exit %d: %s %s" % (rc, out, err))
rc, out, err = run([DEVICES, "--model", m, "--json"])
check("clnode-devices --model --json: out_scale",
      rc == 0 and json.loads(out)["out_scale"] == {"values": [0.5], "dtype": "F32"}, out + err)
rc, d, err = solve_json(["--model", m, "--y0", CSV_ROW, "--precision", "fp64", "--rtol", "1e-10",
                         "--atol", "1e-12"])
got = d["trajectories"][0]["y_final"] if rc == 0 and d else None
check("clnode-solve --model with an output scale solves y0 exp(-s t)",
      got is not None and all(abs(g - v * 0.7788007830714049) <= 1e-8 * abs(v) + 1e-12
                              for g, v in zip(got, ROW)), "exit %d: %s %s" % (rc, got, err))
expect("clnode-devices --model with --no-probe is refused, not ignored",
       run([DEVICES, "--model", m, "--no-probe"]), 2, err_has="--no-probe has no meaning")
expect("clnode-devices --model names a misspelt key too",
       run([DEVICES, "--model", path("typo-final_activaton.safetensors")]), 2,
       err_has="resembles \"final_activation\"")

# ---- bounded reads: endless inputs end at once with the right message ----
expect("--in /dev/zero: refused at its first bytes as no archive",
       run([SOLVE, "--in", "/dev/zero", "--quiet"], timeout=60), 2,
       err_has="/dev/zero: not a .npz file (not a ZIP archive)")
expect("--y0-file /dev/zero: refused at its first byte (NUL: no text)",
       run([SOLVE, "--y0-file", "/dev/zero", "--quiet"], timeout=60), 2,
       err_has="/dev/zero: line 1: a NUL byte")
expect("--y0-file /dev/urandom: refused, not read without end",
       run([SOLVE, "--y0-file", "/dev/urandom", "--quiet"], timeout=60), 2,
       err_has="/dev/urandom: line ")
expect("--t1-file /dev/urandom: refused at its header",
       run([SOLVE, "--t1-file", "/dev/urandom", "--quiet"], timeout=60), 2,
       err_has="/dev/urandom: not a .npy file")
sparse = write("sparse.bin", b"")
os.truncate(sparse, 8 << 30)  # 8 GiB of zeros, no disk
for opt, msg in (("--in", "not a .npz file (not a ZIP archive)"),
                 ("--y0-file", "line 1: a NUL byte"), ("--t1-file", "not a .npy file")):
    expect("%s FILE: 8 GiB of zeros refused at the first bytes, not read whole" % opt,
           run([SOLVE, opt, sparse, "--quiet"], timeout=60), 2, err_has=msg)
os.unlink(sparse)
t1 = npy([0.5, 0.25], [2])
expect("a .npy on a pipe followed by endless bytes: refused after its declared data",
       run([SOLVE, "--t1-file", "-", "--quiet"], stdin=t1, feed=endless(b"\0" * 65536),
           timeout=60), 2, err_has="-: more bytes than the 16 of data the shape needs")
arch = npz({"t1": t1})
expect("a .npz on a pipe followed by endless bytes: refused after its end record",
       run([SOLVE, "--in", "-", "--quiet"], stdin=arch, feed=endless(b"\0" * 65536),
           timeout=60), 2, err_has="-: bytes after the end of the archive")
expect("an endless CSV line on a pipe: refused at the line limit",
       run([SOLVE, "--y0-file", "-", "--quiet"], feed=endless(b"1" * 65536), timeout=60), 2,
       err_has="-: line 1 is longer than")
y0 = npy(ROW + ROW, [2, DIM])
rc, out, err = run([SOLVE, "--y0-file", "-", "--t1", "0.5", "--json"], stdin=y0)
check("cat y0.npy | clnode-solve --y0-file -: read from the pipe",
      rc == 0 and json.loads(out)["batch"] == 2, "exit %d, %s" % (rc, err))
rc, out, err = run([SOLVE, "--in", "-", "--json"], stdin=npz({"t1": t1}))
check("cat in.npz | clnode-solve --in -: read from the pipe",
      rc == 0 and json.loads(out)["batch"] == 2, "exit %d, %s" % (rc, err))
expect("a .npy shorter than its header declares is refused",
       run([SOLVE, "--t1-file", write("short.npy", t1[:-3]), "--quiet"]), 2,
       err_has="13 bytes of data, but the shape needs 16")
expect("a .npy on a pipe shorter than its header declares is refused",
       run([SOLVE, "--t1-file", "-", "--quiet"], stdin=t1[:-3]), 2,
       err_has="13 bytes of data, but the shape needs 16")
big = npy([], [3000000000])  # the header alone; the data would be 24 GB
expect("a .npy declaring more rows than the batch limit: refused, named, before its data",
       run([SOLVE, "--t1-file", "-", "--quiet"], stdin=big, feed=endless(b"\0" * 65536),
           timeout=60), 2, err_has="3000000000 rows, more than 2147483647 (the batch limit)")

expect("a y0 .npy of the wrong shape on an endless pipe: refused at its header",
       run([SOLVE, "--y0-file", "-", "--quiet"], stdin=npy([], [3, 7]),
           feed=endless(b"\0" * 65536), timeout=60), 2, err_has="-: y0 of shape (3, 7)")
expect("a t1 .npy of the wrong shape on an endless pipe: refused at its header",
       run([SOLVE, "--t1-file", "-", "--quiet"], stdin=npy([], [2, 2]),
           feed=endless(b"\0" * 65536), timeout=60), 2,
       err_has="-: t1 of shape (2, 2): one value per trajectory")

# ---- the CSV says each trajectory's result ----
rc, out, err = run([SOLVE, "--batch", "2", "--max-steps", "3", "--save", "ts:0.01,0.345,1",
                    "--save", "t1", "--out", "-"])
lines = out.strip().split("\n")
rows = [l.split(",") for l in lines[1:]]
check("CSV: a result column, the trajectory's result on each of its rows",
      rc == 1 and lines[0].split(",")[-1] == "result" and len(rows) > 0 and
      all(r[-1] == "max_steps_reached" for r in rows) and
      all(len(r) == 3 + DIM + 1 for r in rows), "exit %d: %s" % (rc, "\n".join(lines[:4])))
rc, out, err = run([SOLVE, "--t1", "0.5", "--save", "t1", "--out", "-"])
check("CSV: a successful trajectory's rows say success",
      rc == 0 and out.split("\n")[1].split(",")[-1] == "success", out[:300])

# ---- messages name the right cause ----
expect("an empty .npz is said to be empty", run([SOLVE, "--in", write("empty.npz", b"")]), 2,
       err_has="an empty file (not a .npz archive)")
end_only = b"PK\x05\x06" + b"\0" * 18  # numpy.savez() of no arrays: the end record alone
for opt, extra in (("--in", []), ("--cotangents", ["--grad-out", path("g.npz")])):
    expect("%s: an archive of no members is said to be empty (not \"not a ZIP archive\")" % opt,
           run([SOLVE, opt, write("none.npz", end_only)] + extra), 2,
           err_has="none.npz: an empty archive (no members")
expect("--in -: an archive of no members on a pipe is said to be empty",
       run([SOLVE, "--in", "-"], stdin=end_only), 2, err_has="-: an empty archive (no members")
expect("an empty .npy is said to be empty", run([SOLVE, "--t1-file", write("empty.npy", b"")]), 2,
       err_has="an empty file (not a .npy file)")
os.mkdir(path("dir"))
for opt in ("--in", "--y0-file", "--t1-file"):
    expect("%s DIRECTORY is said to be unreadable (not empty, not malformed)" % opt,
           run([SOLVE, opt, path("dir")]), 2, err_has="Is a directory")
expect("--batch 3000000000 names the batch limit (not out of memory)",
       run([SOLVE, "--batch", "3000000000"]), 2,
       err_has="--batch expects an integer in [1, 2147483647] (the batch limit)")
expect("--batch 2147483648 names the batch limit", run([SOLVE, "--batch", "2147483648"]), 2,
       err_has="(the batch limit)")
expect("--y0-file - --t1-file -: standard input can be read by one option only",
       run([SOLVE, "--y0-file", "-", "--t1-file", "-"], stdin=b""), 2,
       err_has="--y0-file - and --t1-file - both name standard input")
expect("--t0-file - --in -: the same", run([SOLVE, "--t0-file", "-", "--in", "-"], stdin=b""), 2,
       err_has="--t0-file - and --in - both name standard input")

shutil.rmtree(TMP, ignore_errors=True)
print("%d check%s failed" % (len(FAILED), "" if len(FAILED) == 1 else "s") if FAILED else
      "all checks passed")
sys.exit(1 if FAILED else 0)
