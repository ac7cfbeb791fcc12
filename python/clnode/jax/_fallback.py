"""What clnode.jax.diffeqsolve does with a call it does not take: hands it to
diffrax.diffeqsolve with the same arguments and a warning naming the reason (once per call
site: Python's default filter for the warning's class), or, with fallback="error" (the keyword)
or CLNODE_JAX_FALLBACK=error (the environment, for whole test suites), refuses it with the same
reason."""
import os
import warnings
from typing import Any, Optional

from ._field import Refusal

ENV = "CLNODE_JAX_FALLBACK"
MODES = ("warn", "error")


class UnsupportedArgument(Refusal):
    """An argument of diffrax.diffeqsolve (or a vector field) that clnode.jax.diffeqsolve does
    not take: with fallback="error" it is raised, else the call is diffrax's."""


class FallbackWarning(UserWarning):
    """clnode.jax.diffeqsolve handed a call to diffrax.diffeqsolve; the message says why."""


def mode(fallback: Optional[str]) -> str:
    """The fallback mode of a call: the keyword, else $CLNODE_JAX_FALLBACK, else "warn"."""
    where = "fallback"
    if fallback is None:
        fallback = os.environ.get(ENV) or "warn"
        where = ENV
    if not isinstance(fallback, str) or fallback not in MODES:
        raise ValueError(f"{where} must be one of {', '.join(repr(m) for m in MODES)}, not "
                         f"{fallback!r}")
    return fallback


def hand_over(why: Refusal, how: str, diffrax_call: Any, stacklevel: int) -> Any:
    """The refused call's outcome: with how == "error" the refusal raised (as an
    UnsupportedArgument); else a FallbackWarning and diffrax_call()."""
    if not isinstance(why, UnsupportedArgument):
        why = UnsupportedArgument(f"clnode.jax.diffeqsolve does not take the vector field: "
                                  f"{why}")
    if how == "error":
        raise why
    warnings.warn(f"{why}; solved by diffrax.diffeqsolve instead (fallback='error' or "
                  f"{ENV}=error refuses such a call)", FallbackWarning, stacklevel=stacklevel + 1)
    return diffrax_call()
