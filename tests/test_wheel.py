"""The package as a user installs it (``pip install git+...``, the Colab cell): the wheel built from the
tree holds every non-Python file the package reads at run time, and an installed wheel builds and loads
the native grid_sample kernel and finds the publisher's templates."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # builds a wheel and compiles the C++ kernel from the installed copy

PACKAGE = ROOT / "src" / "sidebyside"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, text=True, timeout=300)
    (built,) = out.glob("sidebyside-*.whl")
    return built


def test_the_wheel_holds_every_file_the_package_reads(wheel):
    """Every file under src/sidebyside that git tracks is in the wheel, Python or not (C++ source, templates)."""
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "src/sidebyside"], capture_output=True, text=True,
                             check=True).stdout.split()
    expected = {Path(name).relative_to("src").as_posix() for name in tracked}
    with zipfile.ZipFile(wheel) as zf:
        held = {name for name in zf.namelist() if name.startswith("sidebyside/")}
    assert any(name.endswith(".cc") for name in expected) and any("/templates/" in name for name in expected)
    assert expected - held == set(), f"left out of the wheel: {sorted(expected - held)}"


def test_an_installed_wheel_builds_the_native_kernel_and_finds_its_templates(wheel, tmp_path):
    target = tmp_path / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)
    code = ("import sidebyside, numpy as np, jax.numpy as jnp\n"
            "from sidebyside.grid_sample import native\n"
            "from sidebyside.publish.common import TEMPLATES\n"
            "assert (TEMPLATES / 'sidebyside' / 'index.md.j2').is_file(), TEMPLATES\n"
            "x = jnp.asarray(np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4))\n"
            "g = jnp.zeros((1, 2, 2, 2), jnp.float32)\n"
            "out = sidebyside.grid_sample(x, g, implementation='native')\n"
            "print(sidebyside.__file__, native.build(), float(out.sum()))\n")
    env = {**os.environ, "PYTHONPATH": str(target), "SIDEBYSIDE_NATIVE_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    module, library, total = result.stdout.split()
    assert module.startswith(str(target)), module  # the installed copy, not the checkout
    assert Path(library).is_file() and Path(library).parent == tmp_path / "cache"
    assert float(total) == pytest.approx(4 * 5.5)  # the image's centre, bilinear: (5 + 6) / 2 at four points
