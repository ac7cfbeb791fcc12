#!/usr/bin/env python3
"""test_cli_outputs.py - an output never destroys an input or another file's identity, and a
resumed run is the same problem (clnode-solve, clnode-compare).

    test_cli_outputs.py SOLVE COMPARE          outputs (suite tools)
    test_cli_outputs.py --resume SOLVE         --resume and the MPI writer (suite mpi: the tool
                                               built with MPI, run as an MPI singleton)

Outputs: --out naming any input (--model, --y0-file CSV and .npy and standard input, --t0-file,
--t1-file, --dt0-file, --args-file, --in), spelled relative, absolute, ./, as a hard link and as a
symbolic link, is refused (2) naming both, the input untouched; clnode-compare --plot likewise. A
symbolic link is written through to its target; an existing file keeps its mode (and, written by
root, its owner and group); a file the user could not write in place (read-only, or another
user's) is refused; a missing or read-only directory is exit status 3 (the README's table); SIGINT
and SIGTERM leave no temporary file and end the process with the signal; in --grad-out's reverse
pass they stop it within a group of blocks and leave neither output (--out and --grad-out appear
together or not at all), and a SIGINT ignored at the start stays ignored. The ownership and mode
cases run as user 65534 (setpriv, util-linux): as root, every file is writable. Without setpriv
those checks FAIL (they are never skipped). That user runs a copy of the tool and of the build
tree's libraries staged in a world-readable temporary directory, so that the checks hold wherever
the checkout is (a private home, a mktemp -d folder).

Resume: a run killed midway, resumed after changing one thing (the model's bytes at the same path,
y0, t0/t1/dt0 files, the args file, an option), is refused naming what changed; --rtol=1e-3 then
--rtol 0.001 is the same problem and resumes to the bytes of an uninterrupted run. The MPI writer
keeps the target's identity and removes its temporary file on SIGINT and SIGTERM too; SIGINT and
SIGTERM in a --grad-out run's reverse pass leave no output and a record that the rerun resumes
from, to the bytes of an uninterrupted run.

Standard library only. Exit status 0 when every check passes, 1 otherwise.
"""
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

RESUME = "--resume" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--resume"]
SOLVE = os.path.abspath(ARGS[0])
COMPARE = os.path.abspath(ARGS[1]) if len(ARGS) > 1 else None
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")  # tests/
TANH = os.path.join(HERE, "data", "models", "tanh4x32.safetensors")  # dim 4
COND = os.path.join(HERE, "data", "models", "cond4x2.safetensors")  # dim 4, 2 inputs
NOBODY = 65534
SETPRIV = shutil.which("setpriv")
FAILED = []
os.umask(0o022)


def reachable(d):
    """Whether every directory from / to d lets any user through (o+x)."""
    d = os.path.realpath(d)
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return False
        if d == os.path.dirname(d):
            return True
        d = os.path.dirname(d)


# a directory user 65534 can reach and write: mkdtemp makes it 0700, in $TMPDIR if that user can
# reach it, else in /tmp
TMP = tempfile.mkdtemp(prefix="clnode-outputs-",
                       dir=None if reachable(tempfile.gettempdir()) else "/tmp")
os.chmod(TMP, 0o777)
ENV = dict(os.environ, HOME=TMP, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           CLNODE_NUM_THREADS="1")
ENV.pop("CLNODE_MPI", None)


def check(name, cond, detail=""):
    print("%s: %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else "\n      " + detail),
          flush=True)
    if not cond:
        FAILED.append(name)


def default_signals():
    """In the child: SIGINT as a terminal gives it (a background shell job ignores it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stage(tools):
    """Copies of the tools that user 65534 can run wherever the build tree is (a checkout in a
    private directory, such as root's home or a mktemp -d folder, is out of that user's reach):
    each tool and the libraries of its tree that it loads (ldd: libclnode.so.1) in a
    world-readable directory of TMP, bin/ and lib/, which the tools' RUNPATH ($ORIGIN/../lib)
    and LD_LIBRARY_PATH both name. Returns {tool: its copy} and the environment to add."""
    root = os.path.join(TMP, "stage")
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(root, "lib"))
    copies = {}
    for tool in tools:
        tree = os.path.dirname(os.path.dirname(tool)) + os.sep  # the build directory
        lines = subprocess.run(["ldd", tool], capture_output=True, text=True).stdout.splitlines()
        for line in lines:  # "libclnode.so.1 => /build/lib/libclnode.so.1 (0x...)"
            m = re.match(r"\s*(\S+) => (/\S+)", line)
            if m and os.path.realpath(m.group(2)).startswith(os.path.realpath(tree)):
                shutil.copy(m.group(2), os.path.join(root, "lib", m.group(1)))
        copies[tool] = shutil.copy(tool, os.path.join(root, "bin", os.path.basename(tool)))
    env = {"LD_LIBRARY_PATH": os.path.join(root, "lib")}
    # a sanitizer build's suppressions file (LSAN_OPTIONS=suppressions=PATH in the tree) is
    # staged too: that user cannot read it where it is
    lsan = os.environ.get("LSAN_OPTIONS", "")
    m = re.search(r"suppressions=([^:]+)", lsan)
    if m and os.path.isfile(m.group(1)):
        supp = shutil.copy(m.group(1), os.path.join(root, "lsan.supp"))
        env["LSAN_OPTIONS"] = lsan.replace(m.group(0), "suppressions=" + supp)
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o755)
    return copies, env


STAGED, STAGED_ENV = stage([t for t in (SOLVE, COMPARE) if t])


def run(args, as_nobody=False, env=None, stdin=None, cwd=TMP, timeout=300):
    """Runs a tool (as user 65534: its staged copy, as root's run would); returns (exit status,
    stdout, stderr)."""
    cmd = args
    if as_nobody:
        cmd = [SETPRIV, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
               STAGED.get(args[0], args[0])] + args[1:]
        env = dict(STAGED_ENV, **(env or {}))
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=cwd, stdin=stdin,
                       env=dict(ENV, **(env or {})), preexec_fn=default_signals)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def path(name):
    return os.path.join(TMP, name)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def write(name, data):
    with open(path(name), "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path(name)


def npy(values, cols=None):
    """A little-endian float64 .npy: (len,) or (len / cols, cols)."""
    shape = "(%d,)" % len(values) if cols is None else "(%d, %d)" % (len(values) // cols, cols)
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % shape
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
            struct.pack("<%dd" % len(values), *values))


def npz(name, members):
    with zipfile.ZipFile(path(name), "w", zipfile.ZIP_STORED) as z:
        for k, v in members.items():
            z.writestr(k + ".npy", v)
    return path(name)


def temporaries(d=TMP):
    return sorted(f for f in os.listdir(d) if f.startswith(".") and f != ".cache")


def spellings(name):
    """The paths that name the file `name` in TMP (run with cwd TMP): relative, absolute, ./, a
    hard link, a symbolic link."""
    hard, sym = name + ".hard", name + ".sym"
    for p in (hard, sym):
        if os.path.lexists(path(p)):
            os.unlink(path(p))
    os.link(path(name), path(hard))
    os.symlink(name, path(sym))
    return [("relative", name), ("absolute", path(name)), ("./", "./" + name),
            ("a hard link", hard), ("a symbolic link", sym)]


# ---------------------------------------------------------------------------------------------
def outputs_naming_inputs():
    y0 = [0.5, -0.3, 0.2, 0.1]
    write("m.safetensors", read(TANH))
    write("c.safetensors", read(COND))
    write("y0.csv", "0.5,-0.3,0.2,0.1\n")
    write("y0.npy", npy(y0, 4))
    write("t0.npy", npy([0.0]))
    write("t1.npy", npy([0.5]))
    write("dt0.npy", npy([0.01]))
    write("args.npy", npy([0.1, 0.2], 2))
    npz("in.npz", {"y0": npy(y0, 4)})
    base = ["--model", "m.safetensors", "--y0", "0.5,-0.3,0.2,0.1", "--t1", "0.5", "--quiet"]
    cases = [  # (option, file, the other arguments of a valid solve)
        ("--model", "m.safetensors", ["--y0", "0.5,-0.3,0.2,0.1", "--t1", "0.5", "--quiet"]),
        ("--y0-file", "y0.csv", ["--model", "m.safetensors", "--t1", "0.5", "--quiet"]),
        ("--y0-file", "y0.npy", ["--model", "m.safetensors", "--t1", "0.5", "--quiet"]),
        ("--t0-file", "t0.npy", base),
        ("--t1-file", "t1.npy", base[:-3] + ["--quiet"]),
        ("--dt0-file", "dt0.npy", base),
        ("--args-file", "args.npy",
         ["--model", "c.safetensors", "--y0", "0.5,-0.3,0.2,0.1", "--t1", "0.5", "--quiet"]),
        ("--in", "in.npz", ["--model", "m.safetensors", "--t1", "0.5", "--quiet"]),
    ]
    for opt, name, rest in cases:
        before = read(path(name))
        args = rest + [opt, name]
        rc, _, err = run([SOLVE] + args)
        check("the solve with %s %s is valid" % (opt, name), rc == 0, "exit %d: %s" % (rc, err))
        for how, out in spellings(name):
            rc, _, err = run([SOLVE] + args + ["--out", out])
            check("--out naming %s %s (%s: %s) is refused (2) naming both" % (opt, name, how, out),
                  rc == 2 and "--out " + out in err and "%s %s" % (opt, name) in err and
                  "same file" in err, "exit %d: %s" % (rc, err.strip()))
            check("--out naming %s %s (%s): the input is untouched" % (opt, name, how),
                  read(path(name)) == before and os.path.isfile(path(name)) and
                  not os.path.islink(path(name)))
            write(name, before)  # the next spelling starts from the input again
    # standard input: --y0-file - with stdin redirected from the output
    before = read(path("y0.csv"))
    with open(path("y0.csv"), "rb") as f:
        rc, _, err = run([SOLVE, "--model", "m.safetensors", "--t1", "0.5", "--quiet",
                          "--y0-file", "-", "--out", "y0.csv"], stdin=f)
    check("--out naming the file on standard input (--y0-file -) is refused (2)",
          rc == 2 and "standard input" in err and "--out y0.csv" in err,
          "exit %d: %s" % (rc, err.strip()))
    check("--out naming standard input's file: the input is untouched",
          read(path("y0.csv")) == before)
    if COMPARE:
        before = read(path("m.safetensors"))
        for how, out in spellings("m.safetensors"):
            rc, _, err = run([COMPARE, "--model", "m.safetensors", "--devices", "host",
                              "--plot", out])
            check("clnode-compare --plot naming --model (%s) is refused (2) naming both" % how,
                  rc == 2 and "--plot " + out in err and "--model m.safetensors" in err,
                  "exit %d: %s" % (rc, err.strip()))
        check("clnode-compare --plot naming --model: the model is untouched",
              read(path("m.safetensors")) == before)
    check("no temporary file is left by the refusals", not temporaries(), str(temporaries()))


# ---------------------------------------------------------------------------------------------
def identity(writer="one process", env=None, full=True):
    """Symbolic links, mode, owner and group of an existing --out (CSV and .npz) kept; with
    full, the refusals and the directories too."""
    # a symbolic link is written through: the link stays, its target gets the output
    for ext, magic in (("csv", b"traj,kind,t,y0"), ("npz", b"PK\x03\x04")):
        target, link = "target." + ext, "link." + ext
        write(target, "OLD\n")
        if os.path.lexists(path(link)):
            os.unlink(path(link))
        os.symlink(target, path(link))
        rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", link], env=env)
        check("%s: --out .%s through a symbolic link: written (0)" % (writer, ext), rc == 0,
              "exit %d: %s" % (rc, err))
        check("%s: --out .%s through a symbolic link: the link stays" % (writer, ext),
              os.path.islink(path(link)) and os.readlink(path(link)) == target)
        check("%s: --out .%s through a symbolic link: the target holds the output"
              % (writer, ext), read(path(target)).startswith(magic), repr(read(path(target))[:40]))
    if os.path.lexists(path("dangling.csv")):
        os.unlink(path("dangling.csv"))
    os.symlink("nowhere/missing.csv", path("dangling.csv"))
    rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", "dangling.csv"], env=env)
    check("%s: --out a symbolic link to nothing is refused (3), the link kept" % writer,
          rc == 3 and "symbolic link" in err and os.path.islink(path("dangling.csv")),
          "exit %d: %s" % (rc, err.strip()))

    # root can give the new file away: another user's file keeps its owner, group and mode
    for ext in ("csv", "npz"):
        theirs = write("nobodys." + ext, "NOBODY'S\n")
        os.chown(theirs, NOBODY, NOBODY)
        os.chmod(theirs, 0o640)
        rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", theirs], env=env)
        st = os.stat(theirs)
        check("%s: root replacing user %d's --out .%s keeps its owner, group and mode 640"
              % (writer, NOBODY, ext),
              rc == 0 and (st.st_uid, st.st_gid) == (NOBODY, NOBODY) and
              stat.S_IMODE(st.st_mode) == 0o640 and read(theirs) != b"NOBODY'S\n",
              "exit %d, uid %d gid %d mode %o: %s" % (rc, st.st_uid, st.st_gid,
                                                     stat.S_IMODE(st.st_mode), err))

    # the ownership and mode cases, as a user other than root
    if not SETPRIV:
        check("setpriv (util-linux) runs the ownership and mode cases as user %d" % NOBODY, False,
              "setpriv not found: install util-linux; these cases cannot be checked as root")
        return
    rc, out, err = run([SOLVE, "--version"], as_nobody=True, env=env)
    check("%s: the staged clnode-solve runs as user %d (wherever the build tree is)"
          % (writer, NOBODY), rc == 0 and "clnode-solve" in out, "exit %d: %s" % (rc, err))
    for ext in ("csv", "npz"):
        mine = write("mine600." + ext, "OLD\n")
        os.chown(mine, NOBODY, NOBODY)
        os.chmod(mine, 0o600)
        rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", mine], as_nobody=True,
                         env=env)
        st = os.stat(mine)
        check("%s: mode 600 of an existing --out .%s is kept (as user %d)" % (writer, ext, NOBODY),
              rc == 0 and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == NOBODY and
              read(mine) != b"OLD\n",
              "exit %d, mode %o, uid %d: %s" % (rc, stat.S_IMODE(st.st_mode), st.st_uid, err))
        if not full:
            continue
        theirs = write("theirs-ro." + ext, "ROOT'S\n")
        os.chmod(theirs, 0o444)  # root's, read-only, in a directory user 65534 can write
        rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", theirs], as_nobody=True)
        st = os.stat(theirs)
        check("another user's read-only --out .%s is refused (3), untouched" % ext,
              rc == 3 and "not replaced" in err and read(theirs) == b"ROOT'S\n" and
              st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o444,
              "exit %d, uid %d, mode %o: %s" % (rc, st.st_uid, stat.S_IMODE(st.st_mode), err))
        shared = write("theirs-rw." + ext, "ROOT'S\n")
        os.chmod(shared, 0o666)  # writable, but replacing it would make it 65534's
        rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", shared], as_nobody=True)
        check("another user's writable --out .%s is refused (3): its owner is kept" % ext,
              rc == 3 and "another user" in err and read(shared) == b"ROOT'S\n" and
              os.stat(shared).st_uid == 0, "exit %d: %s" % (rc, err.strip()))
    if not full:
        return
    # an output that cannot be created: the README's table says 3
    rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", "no/such/dir/out.csv"])
    check("--out into a missing directory exits 3", rc == 3 and "cannot write" in err,
          "exit %d: %s" % (rc, err.strip()))
    ro = path("readonly-dir")
    os.makedirs(ro, exist_ok=True)
    os.chmod(ro, 0o555)
    for ext in ("csv", "npy"):
        rc, _, err = run([SOLVE, "--t1", "0.5", "--quiet", "--out", os.path.join(ro, "o." + ext)],
                         as_nobody=True)
        check("--out .%s into a read-only directory exits 3 (as user %d)" % (ext, NOBODY),
              rc == 3 and "cannot write" in err and not os.listdir(ro),
              "exit %d: %s" % (rc, err.strip()))
    check("no temporary file is left", not temporaries(), str(temporaries()))


# ---------------------------------------------------------------------------------------------
LONG = ["--batch", "100000", "--t1", "5000", "--max-steps", "100000000", "--quiet"]


def interrupted(name, env=None):
    """SIGINT and SIGTERM during a long solve writing `name` (CSV and .npz): the temporary file
    existed, is gone after the signal, and the exit status is the signal's."""
    d = tempfile.mkdtemp(dir=TMP)
    for sig in (signal.SIGINT, signal.SIGTERM):
        for ext in ("csv", "npz"):
            out = os.path.join(d, "%s.%s" % (name, ext))
            p = subprocess.Popen([SOLVE] + LONG + ["--out", out], env=dict(ENV, **(env or {})),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=default_signals)
            t = time.time()
            while not temporaries(d) and p.poll() is None and time.time() - t < 60:
                time.sleep(0.01)
            seen = temporaries(d)
            time.sleep(0.3)  # into the solve
            p.send_signal(sig)
            rc = p.wait(60)
            p.stderr.close()
            what = "%s %s .%s" % (name, signal.Signals(sig).name, ext)
            check("%s: the temporary file existed during the solve" % what, bool(seen),
                  "exit %s" % rc)
            check("%s: ends with the signal (status %d)" % (what, -sig), rc == -sig, "exit %s" % rc)
            check("%s: no temporary file is left" % what, not temporaries(d) and
                  not os.path.exists(out), str(os.listdir(d)))


# ---------------------------------------------------------------------------------------------
GRAD_B = 4096  # the seed model, one thread: the reverse pass takes 8 groups of 16 blocks
GRAD_CHUNK = "1024"  # under MPI: two groups of blocks per chunk, the cancel polled between them


def grad_cotangents(d):
    """dL/dys = 1 for the seed model's (GRAD_B, 1, 10) saved values, as a .npy in d."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, 1, 10), }" % GRAD_B
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    cot = os.path.join(d, "cot.npy")
    with open(cot, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
                struct.pack("<d", 1.0) * (GRAD_B * 10))
    return cot


def grad_args(d, cot, extra=()):
    return [SOLVE, "--batch", str(GRAD_B), "--quiet", "--out", os.path.join(d, "ys.npz"),
            "--cotangents", cot, "--grad-out", os.path.join(d, "g.npz")] + list(extra)


def signal_in_reverse(args, sig, env=None, ready=None, preexec=default_signals):
    """Runs args; once the reverse pass is under way (the test hook's line on standard error,
    after its first group of blocks) and ready() holds, sends sig. Returns the exit status, the
    seconds from the signal to the end and standard error."""
    env = dict(ENV, CLNODE_SOLVE_TEST_NOTE_REVERSE="1", **(env or {}))
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=preexec)
    err = []
    for line in p.stderr:  # to the end of standard error if the line never comes
        err.append(line.decode("utf-8", "replace"))
        if b"reverse pass is under way" in line:
            break
    t = time.time()
    while ready and not ready() and p.poll() is None and time.time() - t < 120:
        time.sleep(0.01)
    t = time.time()
    p.send_signal(sig)
    rc = p.wait(120)
    elapsed = time.time() - t
    err.append(p.stderr.read().decode("utf-8", "replace"))
    p.stderr.close()
    return rc, elapsed, "".join(err)


def interrupted_reverse(name, env=None):
    """SIGINT and SIGTERM during --grad-out's reverse pass: the pass stops within a group of
    blocks (seconds), the process ends with the signal, and neither output nor a temporary file
    is left (ys.npz and g.npz appear together or not at all). A SIGINT ignored when the tool
    started stays ignored: the run completes both outputs."""
    d = tempfile.mkdtemp(dir=TMP)
    cot = grad_cotangents(d)
    for sig in (signal.SIGINT, signal.SIGTERM):
        what = "%s %s in the reverse pass" % (name, signal.Signals(sig).name)
        rc, elapsed, err = signal_in_reverse(grad_args(d, cot), sig, env=env)
        check("%s: ends with the signal (status %d) within 20 s" % (what, -sig),
              rc == -sig and elapsed < 20, "exit %s after %.1f s: %s" % (rc, elapsed, err[-800:]))
        check("%s: neither output nor a temporary file is left" % what,
              sorted(os.listdir(d)) == ["cot.npy"], str(os.listdir(d)))

    def ignore_sigint():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    rc, _, err = signal_in_reverse(grad_args(d, cot), signal.SIGINT, env=env,
                                   preexec=ignore_sigint)
    check("%s: a SIGINT ignored at the start stays ignored: both outputs written (0)" % name,
          rc == 0 and sorted(os.listdir(d)) == ["cot.npy", "g.npz", "ys.npz"],
          "exit %s: %s %s" % (rc, os.listdir(d), err[-800:]))


def interrupted_reverse_resume():
    """--resume under MPI (a singleton): SIGINT and SIGTERM in a chunk's reverse pass once the
    record holds two chunks' gradients: the process ends with the signal, no output, the record
    kept; the rerun resumes from the chunks recorded to the bytes of an uninterrupted run."""
    d = tempfile.mkdtemp(dir=TMP)
    cot = grad_cotangents(d)
    ref = tempfile.mkdtemp(dir=TMP)
    rc, _, err = run(grad_args(ref, cot, ["--chunk-size", GRAD_CHUNK]), env={"CLNODE_MPI": "0"})
    check("reverse resume: the uninterrupted run", rc == 0, "exit %d: %s" % (rc, err))
    record = os.path.join(d, "ys.npz.progress")
    args = grad_args(d, cot, ["--chunk-size", GRAD_CHUNK, "--resume"])
    env = {"CLNODE_MPI": "1"}
    for sig in (signal.SIGINT, signal.SIGTERM):
        what = "mpi --resume %s in the reverse pass" % signal.Signals(sig).name
        shutil.rmtree(record, ignore_errors=True)

        def two_chunks():  # two chunks' gradients recorded (renamed into place)
            return os.path.isdir(record) and sum(re.fullmatch(r"grad-\d+", f) is not None
                                                 for f in os.listdir(record)) >= 2
        rc, elapsed, err = signal_in_reverse(args, sig, env=env, ready=two_chunks)
        check("%s: ends with the signal (status %d) within 20 s" % (what, -sig),
              rc == -sig and elapsed < 20, "exit %s after %.1f s: %s" % (rc, elapsed, err[-800:]))
        check("%s: no output, no temporary file, the record kept" % what,
              sorted(os.listdir(d)) == ["cot.npy", "ys.npz.progress"], str(os.listdir(d)))
        rc, _, err = run(args, env=env)
        m = re.search(r"resuming from \S+: (\d+) of", err)
        check("%s: the rerun resumes from the chunks recorded (at least 2)" % what,
              rc == 0 and m is not None and int(m.group(1)) >= 2, "exit %d: %s" % (rc, err.strip()))
        check("%s: the rerun writes the uninterrupted run's ys.npz and g.npz" % what,
              all(os.path.exists(os.path.join(d, f)) and
                  read(os.path.join(d, f)) == read(os.path.join(ref, f))
                  for f in ("ys.npz", "g.npz")), str(os.listdir(d)))
        for f in ("ys.npz", "g.npz"):
            if os.path.exists(os.path.join(d, f)):
                os.unlink(os.path.join(d, f))


# ---------------------------------------------------------------------------------------------
def resume():
    B = 8
    y0 = [((i * 7 + j * 3) % 11) / 11.0 - 0.5 for i in range(B) for j in range(4)]
    files = {"y0": npy(y0, 4), "t0": npy([0.0] * B), "t1": npy([0.2 + 0.05 * i for i in range(B)]),
             "dt0": npy([0.01] * B), "args": npy([0.1 * i for i in range(2 * B)], 2)}
    for k, v in files.items():
        write(k + ".npy", v)
    write("cm.safetensors", read(COND))
    args = ["--model", "cm.safetensors", "--y0-file", "y0.npy", "--t0-file", "t0.npy",
            "--t1-file", "t1.npy", "--dt0-file", "dt0.npy", "--args-file", "args.npy",
            "--chunk-size", "2", "--quiet"]
    rc, _, err = run([SOLVE] + args + ["--rtol=1e-3", "--out", "ref.csv"], env={"CLNODE_MPI": "0"})
    check("resume: the uninterrupted run", rc == 0, "exit %d: %s" % (rc, err))
    out = "res.csv"
    rerun = [SOLVE] + args + ["--rtol=1e-3", "--out", out, "--resume"]

    def make_record():
        """A run killed after its first chunk: a partial progress record."""
        if os.path.exists(path(out)):
            os.unlink(path(out))
        shutil.rmtree(path(out + ".progress"), ignore_errors=True)
        rc, _, err = run(rerun, env={"CLNODE_SOLVE_TEST_EXIT_AFTER": "1"})
        check("resume: the killed run leaves a progress record",
              rc != 0 and os.path.isdir(path(out + ".progress")), "exit %d: %s" % (rc, err))

    def refused(what, must_name, extra=(), name=None, changed=None):
        """Resumes after one change (extra options, or file `name` rewritten as `changed`):
        refused naming `must_name`; the file is restored after."""
        if not os.path.isfile(path(out + ".progress/manifest")):
            make_record()  # a run that should have been refused went on (with what it had)
        if name:
            before = read(path(name))
            write(name, changed)
        rc, _, err = run(rerun + list(extra))
        if name:
            write(name, before)
        check("resume after changing %s: refused (2) naming it" % what,
              rc == 2 and must_name in err and "changed since the progress record" in err,
              "exit %d: %s" % (rc, err.strip()))
        check("resume after changing %s: no output written" % what, not os.path.exists(path(out)))

    make_record()
    model = bytearray(read(path("cm.safetensors")))
    model[-4:] = struct.pack("<f", 0.123)  # the last weight: same size, same path
    refused("the model's bytes (same path)", "the model file cm.safetensors",
            name="cm.safetensors", changed=bytes(model))
    for k in ("y0", "t0", "t1", "dt0", "args"):
        start = 10 + struct.unpack("<H", files[k][8:10])[0]  # the data after the header
        vals = list(struct.unpack("<%dd" % ((len(files[k]) - start) // 8), files[k][start:]))
        vals[-1] += 0.015625
        refused("the contents of %s.npy" % k, "%s.npy" % k, name=k + ".npy",
                changed=npy(vals, 4 if k == "y0" else 2 if k == "args" else None))
    for opt in (["--rtol", "1e-4"], ["--atol", "1e-7"], ["--method", "dopri5"],
                ["--max-steps", "999"], ["--precision", "fp64"], ["--pcoeff", "0.1"],
                ["--save", "t0"]):
        refused("option %s %s" % tuple(opt), opt[0] if opt[0] != "--save" else "--save t0", opt)
    # an old record: its format line names another version
    if not os.path.isfile(path(out + ".progress/manifest")):
        make_record()
    manifest = path(out + ".progress/manifest")
    text = read(manifest)
    write(out + ".progress/manifest", b"clnode-solve progress record 1\nfingerprint 0\n")
    rc, _, err = run(rerun)
    check("resume from a record of format 1: refused (2) naming the format",
          rc == 2 and "record format 1" in err, "exit %d: %s" % (rc, err.strip()))
    write(out + ".progress/manifest", text)
    # the same problem, spelled otherwise: --rtol 0.001 for --rtol=1e-3
    rc, _, err = run([SOLVE] + args + ["--rtol", "0.001", "--out", out, "--resume"])
    check("resume with --rtol 0.001 after --rtol=1e-3: the same problem, resumed (0)",
          rc == 0 and "chunks already solved" in err and " 0 of " not in err,
          "exit %d: %s" % (rc, err.strip()))
    check("resume: the output is the uninterrupted run's bytes",
          os.path.exists(path(out)) and read(path(out)) == read(path("ref.csv")))
    check("resume: the record is removed", not os.path.exists(path(out + ".progress")))

    # each trajectory its own save times (--ts-file): adding them to a record of none, or
    # changing a row of a record made with them, is refused naming them; unchanged, the rerun
    # resumes to an uninterrupted run's bytes
    rows = [t for i in range(B) for t in (0.05, 0.1, 0.18 + 0.045 * i)]
    write("ts.npy", npy(rows, 3))
    make_record()
    refused("--ts-file added", "--ts-file", ["--ts-file", "ts.npy"])
    rc, _, err = run([SOLVE] + args + ["--rtol=1e-3", "--ts-file", "ts.npy", "--out",
                                       "ref-ts.csv"], env={"CLNODE_MPI": "0"})
    check("resume: the uninterrupted run with --ts-file", rc == 0, "exit %d: %s" % (rc, err))
    shutil.rmtree(path(out + ".progress"), ignore_errors=True)
    rerun.extend(["--ts-file", "ts.npy"])
    make_record()
    changed = list(rows)
    changed[-1] += 0.001
    refused("the contents of ts.npy", "the save times (--ts-file ts.npy)", name="ts.npy",
            changed=npy(changed, 3))
    rc, _, err = run(rerun)
    check("resume with --ts-file: resumed (0) to the uninterrupted run's bytes",
          rc == 0 and os.path.exists(path(out)) and read(path(out)) == read(path("ref-ts.csv")),
          "exit %d: %s" % (rc, err.strip()))


# ---------------------------------------------------------------------------------------------
if RESUME:
    resume()
    # the MPI writer: rank 0's temporary file, the target's identity
    interrupted("mpi", env={"CLNODE_MPI": "1"})
    interrupted_reverse_resume()
    identity("MPI writer", env={"CLNODE_MPI": "1"}, full=False)
else:
    outputs_naming_inputs()
    identity()
    interrupted("one")
    interrupted_reverse("one")

if FAILED:
    print("%d check(s) failed: %s" % (len(FAILED), "; ".join(FAILED)))
    sys.exit(1)
shutil.rmtree(TMP, ignore_errors=True)
print("test_cli_outputs: every check passed")
