"""clnode: batches of neural ODEs dy/dt = MLP(y), solved with diffrax's adaptive Runge-Kutta
methods on the host CPU, OpenCL devices or CUDA GPUs, with the same step counts and the same bits
on every device and at every batch size.

    import numpy as np, clnode
    sol = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=50, dt0=0.02,
                       rtol=1e-4, atol=1e-6, saveat=clnode.SaveAt(steps=True))
    sol.ys, sol.stats["num_steps"]

Models come from arrays (`MLP`), safetensors files (`MLP.load`), equinox (`from_equinox`) or
PyTorch (`from_torch`). `clnode.jax.diffeqsolve` is a drop-in for `diffrax.diffeqsolve` on MLP
vector fields. Every number is computed by the C library (libclnode, linked into the extension
module `clnode._clnode`); this package converts arrays and names.

The library's log goes to the `logging` logger "clnode"; the precision guard's warnings
(a tolerance below what the device resolves) arrive as `clnode.PrecisionWarning` through
`warnings`. A kernel build (a device's first solve in a process compiles for up to a minute where
the driver's cache is empty) is announced as it starts and timed when done through the logger
"clnode.build" at INFO, which prints on stderr while no handler is configured for it (or above
it); `logging.getLogger("clnode.build").setLevel(logging.WARNING)` silences it.
"""
import logging as _logging
import sys as _sys
import warnings as _warnings

try:
    from . import _clnode
except ImportError as _e:  # the extension runs with numpy 1.23 and later (pyproject.toml)
    import numpy as _np
    if tuple(int(v) for v in _np.__version__.split(".")[:2]) < (1, 23):
        raise ImportError("clnode needs numpy >= 1.23 at run time; this Python has numpy "
                          f"{_np.__version__} ({_np.__file__})") from _e
    raise
from ._clnode import (CancelledError, ContextBusyError, DeviceError, Error, FileError,
                      InvalidArgumentError, ModelError, PrecisionError, UnsupportedError)
from ._model import MLP, from_equinox, from_torch, seed_model
from . import _solve
from ._solve import (OPTIONS, Context, Gradient, Result, SaveAt, Solution, devices, probe, solve,
                     vjp_from_tape)
from ._version import version as __version__

__all__ = ["MLP", "seed_model", "from_equinox", "from_torch", "Context", "SaveAt", "Solution", "Gradient",
           "Result", "OPTIONS", "solve", "vjp_from_tape", "devices", "probe", "library_version", "Error",
           "InvalidArgumentError",
           "ModelError", "FileError", "DeviceError", "UnsupportedError", "PrecisionError",
           "CancelledError", "ContextBusyError", "PrecisionWarning"]

# the library's status name of an error (instances raised by the library carry their own)
Error.status = None
InvalidArgumentError.status = "CLNODE_ERR_INVALID_ARGUMENT"


class PrecisionWarning(UserWarning):
    """The precision guard's warning: rtol is below what the device's arithmetic resolves
    (expect many more steps), or trajectories ended with result "precision_floor"."""


def library_version() -> str:
    """The version of the C library linked into this package ("MAJOR.MINOR.PATCH")."""
    return _clnode.version()


_logger = _logging.getLogger("clnode")
# the library's levels: 0 error, 1 warn, 2 info, 3 debug
_LEVELS = {0: _logging.DEBUG, 1: _logging.WARNING, 2: _logging.INFO, 3: _logging.DEBUG}


# the library's codes of the precision guard's warnings (before a solve, and at the floor)
_GUARD_CODES = {_clnode.LOG_CODES["precision_guard"], _clnode.LOG_CODES["precision_floor"]}


def _is_guard_message(code):
    return code in _GUARD_CODES


_FLOOR_CODE = _clnode.LOG_CODES["precision_floor"]
_BUILD_CODE = _clnode.LOG_CODES["build"]
_build_logger = _logging.getLogger("clnode.build")
_build_logger.setLevel(_logging.INFO)


def _build_line(message):
    """A kernel build's line, as it happens: to the "clnode.build" logger's handlers, or on
    stderr where there are none (logging's own last resort shows only warnings)."""
    if not _build_logger.isEnabledFor(_logging.INFO):
        return
    if _build_logger.hasHandlers():
        _build_logger.info("%s", message)
    else:
        print(f"clnode: {message}", file=_sys.stderr, flush=True)


def _log_sink(messages, origin):
    # Errors are raised as exceptions carrying the same message: logged only at DEBUG.
    for level, code, message in messages:
        if code == _FLOOR_CODE:  # for the solve's Solution (clnode.jax raises it with throw)
            _solve._FLOOR.message = message
        if code == _BUILD_CODE:
            _build_line(message)
            continue
        if level == 1 and _is_guard_message(code):
            _warnings.warn(message, PrecisionWarning, stacklevel=4)
        else:
            _logger.log(_LEVELS.get(level, _logging.DEBUG), "%s: %s", origin, message)


_clnode._set_log_sink(_log_sink)
