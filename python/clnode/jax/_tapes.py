"""The forward's tapes kept for their reverse pass: a forward solved under differentiation keeps
its solution (solved with keep_tape) and its model here under a token, which the forward gives
back as its own output; the reverse pass that reads the token takes the tape. A tape whose
reverse pass never comes (a forward under jax.linearize whose gradient is never taken) is
dropped oldest first beyond MAX_TAPES; a reverse pass that finds none re-solves the batch (the
same steps and bits)."""
import collections
import itertools
import threading
from typing import Any, Optional, Tuple

import numpy as np

MAX_TAPES = 8
_TAPES: "collections.OrderedDict[int, Tuple[Any, Any]]" = collections.OrderedDict()
_LOCK = threading.Lock()
_COUNT = itertools.count(1)


def keep(sol: Any, model: Any) -> int:
    """Keeps a forward's solution and its model; returns its token (never 0: 0 is the token of
    a forward that kept none)."""
    with _LOCK:
        token = next(_COUNT) % 2147483647 or 1
        _TAPES[token] = (sol, model)
        while len(_TAPES) > MAX_TAPES:
            _TAPES.popitem(last=False)
    return token


def take(token: Any) -> Optional[Tuple[Any, Any]]:
    """The kept (solution, model) of the forward whose token `token` holds (the same value for
    every trajectory of the batch), removed; None when none is kept."""
    flat = np.asarray(token).reshape(-1)
    if flat.size == 0 or not np.all(flat == flat[0]):
        return None
    with _LOCK:
        return _TAPES.pop(int(flat[0]), None)
