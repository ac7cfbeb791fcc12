"""The installed package holds every module of the source tree's python/clnode (meson.build lists
them one by one: a module left out of py.install_sources would be missing only once installed)."""
import os

import clnode


def test_every_source_module_is_installed(repo):
    src = os.path.join(str(repo), "python", "clnode")
    installed = os.path.dirname(clnode.__file__)
    want = {f for f in os.listdir(src) if f.endswith((".py", ".pyi", ".typed"))}
    missing = sorted(f for f in want if not os.path.exists(os.path.join(installed, f)))
    assert not missing, f"not installed (python/meson.build's py.install_sources): {missing}"
