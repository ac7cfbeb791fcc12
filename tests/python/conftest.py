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
    # a call clnode.jax.diffeqsolve does not take is refused rather than handed to diffrax, so
    # that a supported form that falls back fails its test (tests of the fallback pass
    # fallback="warn" themselves)
    os.environ["CLNODE_JAX_FALLBACK"] = "error"


@pytest.fixture
def pocl():
    """The device string of PoCL's OpenCL CPU device: skips where it is absent, fails there when
    $CLNODE_REQUIRE_DEVICES names it (as tests/common/test_device.h does for the C tests)."""
    import clnode
    try:
        clnode.Context("opencl:pocl")
    except clnode.Error as e:
        if "opencl:pocl" in os.environ.get("CLNODE_REQUIRE_DEVICES", "").split(","):
            pytest.fail(f"opencl:pocl is required here (CLNODE_REQUIRE_DEVICES) but absent: {e}")
        pytest.skip(f"opencl:pocl is not available: {e}")
    return "opencl:pocl"
