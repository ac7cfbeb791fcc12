import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def repo():
    return REPO


def pytest_configure(config):
    # the drop-in tests compare with diffrax in float64: x64 for the whole session (float32 runs
    # pass float32 arrays explicitly)
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
    except ImportError:
        pass
    os.environ.setdefault("CLNODE_DEVICE", "host")
