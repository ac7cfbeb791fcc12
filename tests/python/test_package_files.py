"""The installed package holds every module of the source tree's python/clnode, its subpackage
clnode.jax included (meson.build lists them one by one: a module left out of
py.install_sources would be missing only once installed), and no module the tree no longer has
(a file moved into clnode.jax left behind by an old install list)."""
import os

import pytest

import clnode


def _modules(root):
    """The package's files under root (.py, .pyi, py.typed), as paths relative to it."""
    out = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out.update(os.path.relpath(os.path.join(d, f), root) for f in files
                   if f.endswith((".py", ".pyi", ".typed")))
    return out


def test_every_source_module_is_installed(repo):
    src = os.path.join(str(repo), "python", "clnode")
    installed = os.path.dirname(clnode.__file__)
    want = _modules(src)
    missing = sorted(f for f in want if not os.path.exists(os.path.join(installed, f)))
    assert not missing, f"not installed (python/meson.build's py.install_sources): {missing}"
    assert os.path.join("jax", "__init__.py") in want


def test_clnode_jax_is_the_package():
    """clnode.jax is the package python/clnode/jax/ (one concern per file), and the modules it
    replaced are gone from the installed package."""
    pytest.importorskip("diffrax")
    import clnode.jax
    installed = os.path.dirname(clnode.__file__)
    assert os.path.basename(os.path.dirname(clnode.jax.__file__)) == "jax"
    assert clnode.jax.__file__.endswith(os.path.join("jax", "__init__.py"))
    stale = [f for f in ("jax.py", "_jax_ad.py", "_jax_field.py", "_jax_fallback.py")
             if os.path.exists(os.path.join(installed, f))]
    assert not stale, f"installed modules that the source tree no longer has: {stale}"
