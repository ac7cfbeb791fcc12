"""Checked conversions of the package's arguments: every value is taken as what it says, or
refused with a TypeError (a value of the wrong kind) or a ValueError (a value out of place),
whose message names the argument. Nothing is coerced by truthiness, truncation or flattening."""
import math
from typing import Any, Optional, Sequence

import numpy as np

EXACT_INT = 2 ** 53
UINT64_MAX = 2 ** 64 - 1


def boolean(value: Any, name: str) -> bool:
    """`value` as a bool: True, False or a numpy.bool_; anything else (strings such as "False",
    integers, None) is refused."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), not {value!r}")


def integer(value: Any, name: str, lo: Optional[int] = None,
            hi: Optional[int] = None) -> int:
    """`value` as a Python int: an int or a numpy integer (not a bool, a float or a string),
    within [lo, hi] where given."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], not {v}")
    return v


def real_array(value: Any, name: str, finite: bool = True) -> np.ndarray:
    """`value` as a float64 numpy array, refusing what float64 would not hold exactly: strings,
    booleans, None, complex and object arrays, long double, integers beyond 2^53, and (with
    `finite`) NaN and infinities."""
    try:
        a = np.asarray(value)
    except Exception as e:  # noqa: BLE001 - ragged nested lists and the like
        raise ValueError(f"{name} must be a number or an array of numbers: {e}") from None
    kind = a.dtype.kind
    if kind == "f":
        if a.dtype.itemsize > 8:
            raise TypeError(f"{name} has dtype {a.dtype}, which float64 would round: pass "
                            "float64 (or float32) values")
    elif kind in "iu":
        if a.size and (np.max(np.abs(a.astype(object))) > EXACT_INT):
            raise TypeError(f"{name} holds integers beyond 2**53, which float64 would round")
    else:
        what = repr(value) if a.ndim == 0 else f"dtype {a.dtype}"
        raise TypeError(f"{name} must be real numbers (float or int), not {what}")
    a = a.astype(np.float64)
    if finite and not np.isfinite(a).all():
        bad = np.flatnonzero(~np.isfinite(a.reshape(-1)))
        where = "" if a.ndim == 0 else f" (at flat index {int(bad[0])})"
        raise ValueError(f"{name} must be finite, not {a.reshape(-1)[bad[0]]}{where}")
    return a


def real(value: Any, name: str, optional: bool = False,
         finite: bool = False) -> Optional[float]:
    """`value` as a Python float: a float, an int float64 holds exactly, a numpy scalar or a 0-d
    array of those; None where `optional`. Non-finite values pass (with finite=False) for the
    library to judge."""
    if value is None and optional:
        return None
    if (type(value) is float and (math.isfinite(value) or not finite)) or (
            type(value) is int and -EXACT_INT <= value <= EXACT_INT):
        return float(value)
    a = real_array(value, name, finite)
    if a.ndim != 0:
        raise ValueError(f"{name} must be a scalar, not an array of shape {a.shape}")
    return float(a)


def name_string(value: Any, name: str, choices: Optional[Sequence[str]] = None) -> str:
    """`value` as a str (one of `choices` where given)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {value!r}")
    if choices is not None and value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")
    return str(value)
