"""Ctrl-C with an eager clnode.solve on the main thread and a jitted solve (clnode's XLA custom
call) on another thread at once: both take Ctrl-C through the process's one SIGINT handler, so
the two paths share one handler of clnode's, installed by the first solve to start and put back
by the last to end, whatever the order in which they start and end. In a fresh process (signals):

1. the custom call starts, the eager solve starts, the custom call ends, then Ctrl-C: the eager
   solve stops within a group of steps (KeyboardInterrupt), not at its end; afterwards Python's
   own handler is back and a later Ctrl-C is a KeyboardInterrupt;
2. both running, one Ctrl-C: both stop (the custom call's error is CANCELLED), the main thread
   gets one KeyboardInterrupt; afterwards Python's handler is back."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")
pytest.importorskip("equinox")
pytest.importorskip("diffrax")

SCRIPT = r"""
import ctypes, os, signal, sys, threading, time
import numpy as np
import diffrax, jax, jax.numpy as jnp
import clnode, clnode.jax
sys.path.insert(0, {here!r})
from test_jax import seed_func

libc = ctypes.CDLL(None, use_errno=True)


def os_handler():
    # the process's SIGINT handler as the kernel has it (struct sigaction's first member)
    buf = ctypes.create_string_buffer(512)
    assert libc.sigaction(signal.SIGINT, None, buf) == 0
    return ctypes.c_void_p.from_buffer(buf).value


PYTHON = os_handler()  # Python's own C handler
f = seed_func()


@jax.jit
def jitted(y0, t1):
    # a jitted solve of t1 / 1e-3 constant steps: one custom call
    return clnode.jax.diffeqsolve(diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, t1, 1e-3, y0,
                                  stepsize_controller=diffrax.ConstantStepSize(),
                                  max_steps=10 ** 7).ys


y0 = jnp.zeros((1, 10), jnp.float32)
jax.block_until_ready(jax.vmap(jitted, in_axes=(0, None))(y0, 0.01))  # compiled
m = clnode.seed_model()


def eager():
    # about 10^6 constant steps: far longer than any wait below
    clnode.solve(m, np.zeros(10), t0=0.0, t1=50.0, dt0=0.00005, constant_step=True,
                 precision="fp64", max_steps=10 ** 7)


def start_jitted(t1, out):
    def run():
        try:
            jax.block_until_ready(jax.vmap(jitted, in_axes=(0, None))(y0, t1))
            out["error"] = None
        except Exception as e:  # noqa: BLE001 - the custom call's error, looked at below
            out["error"] = e
        out["end"] = time.perf_counter()
    th = threading.Thread(target=run)
    th.start()
    t = time.perf_counter()
    while os_handler() == PYTHON:  # until the custom call has installed clnode's handler
        assert th.is_alive() and time.perf_counter() - t < 60, "the custom call did not start"
        time.sleep(0.001)
    return th


def kill_after(wait):
    def fire():
        wait()
        os.kill(os.getpid(), signal.SIGINT)
    return threading.Thread(target=fire)


def eager_until_ctrl_c(killer):
    # the eager solve, interrupted by the thread killer (started inside the try: a signal may
    # come at once); its start and the time KeyboardInterrupt came
    start = time.perf_counter()
    try:
        killer.start()
        eager()
    except KeyboardInterrupt:
        stopped = time.perf_counter()
        killer.join()
        return start, stopped
    raise AssertionError("the eager solve was not interrupted")


def later_ctrl_c_is_keyboard_interrupt():
    assert os_handler() == PYTHON, "clnode's SIGINT handler was left installed"
    try:
        os.kill(os.getpid(), signal.SIGINT)
        t = time.perf_counter()
        while time.perf_counter() - t < 3.0:
            time.sleep(0.01)
    except KeyboardInterrupt:
        return
    raise AssertionError("a Ctrl-C after the solves was lost")


# 1. the custom call (about {seconds_x} s) ends while the eager solve runs, then Ctrl-C
out = {{}}
th = start_jitted({t1_x}, out)
start, stopped = eager_until_ctrl_c(kill_after(lambda: (th.join(), time.sleep(0.2))))
assert out["error"] is None, out["error"]
assert start < out["end"], "the custom call ended before the eager solve started"
late = stopped - out["end"]
print(f"1: the custom call ended {{out['end'] - start:.2f}} s into the eager solve, which stopped "
      f"{{late:.2f}} s after that")
assert late < 5.0, f"the eager solve stopped {{late:.2f}} s after the custom call ended"
later_ctrl_c_is_keyboard_interrupt()

# 2. both running, one Ctrl-C stops both; one KeyboardInterrupt
out = {{}}
th = start_jitted({t1_long}, out)
start, stopped = eager_until_ctrl_c(kill_after(lambda: time.sleep(0.5)))
try:
    th.join()
    time.sleep(1.0)  # a second KeyboardInterrupt would come here
except KeyboardInterrupt:
    raise AssertionError("one Ctrl-C gave two KeyboardInterrupts")
took = out["end"] - start
print(f"2: the eager solve stopped after {{stopped - start:.2f}} s, the custom call after "
      f"{{took:.2f}} s: {{type(out['error']).__name__}}")
assert out["error"] is not None and "CANCELLED" in str(out["error"]), out["error"]
assert "clnode.CancelledError" in str(out["error"]), out["error"]
assert took < 6.0 and stopped - start < 6.0, (took, stopped - start)
later_ctrl_c_is_keyboard_interrupt()
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the kernel's handler")
def test_ctrl_c_with_an_eager_solve_and_a_custom_call_at_once():
    here = os.path.dirname(os.path.abspath(__file__))
    # the custom call of case 1: 1.5 s of steps at about 25 us each (the seed model, B = 1), the
    # one of case 2 (and the eager solve) ten times and more longer than the 6 s allowed
    script = SCRIPT.format(here=here, seconds_x=1.5, t1_x=60.0, t1_long=2000.0)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), r.stdout + r.stderr
