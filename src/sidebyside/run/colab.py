"""A post's notebook run by a reader (on Colab, or any Jupyter), as the post ran it, and compared.

Three cells of every notebook call it, each naming the post's slug and the site's repository
(``owner/name@branch``, the ``repository`` and ``branch`` settings of ``_config.yml``):

- :func:`setup`, in the first code cell, shown in the post and on Colab: says which versions of
  PyTorch, JAX, Flax and optax the post ran with (its published record's provenance) and on
  Colab installs those where the runtime's differ, as builds for the runtime's CUDA driver
  (:func:`install_specs`).
- :func:`parameters`, in the profile cell after the parameters cell: a profile's parameters
  from the post's settings file (:data:`SETTINGS`): ``"smoke"`` (the test suite's small sizes),
  ``"cpu"``, or ``"gpu"`` (a GPU post's own settings); ``"auto"`` picks the post's own profile on a
  GPU runtime and smoke elsewhere. It also names the profile to the run context, so that timings pool
  as many processes as the post's did. Under the publisher it changes nothing (papermill gave them).

The last cell prints the reader's speed verdicts beside the published ones
(:func:`sidebyside.publish.reproduce.in_notebook`, after the results are saved, so the publisher
is never an input of the run).

Files of the site (the published record, the parameters) are read from the checkout when the
library runs from one, else downloaded from the repository's raw files
(``https://raw.githubusercontent.com/<owner>/<name>/<branch>/``, or ``$SIDEBYSIDE_RAW``).

Imports only the standard library, PyYAML and this package's ``run`` modules.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import yaml

from sidebyside.run import context, provenance

__all__ = ["RAW_ENV", "LIBRARIES", "SETTINGS", "on_colab", "site_file", "published", "ran_with", "setup", "parameters",
           "ColabError"]

#: Where a site's raw files are downloaded from, when set (a mirror, a test's local server).
RAW_ENV = "SIDEBYSIDE_RAW"
#: The libraries a post pins, as its provenance names them.
LIBRARIES = ("torch", "jax", "jaxlib", "flax", "optax")
PROFILES = ("smoke", "cpu", "gpu")
#: Where a post's settings live in the repository: one file per post, mapping each profile to the names of
#: its parameters cell (read by the publisher, the GPU planner and the tests too).
SETTINGS = "params/{slug}.yaml"


class ColabError(Exception):
    """A site file cannot be read, or a profile is unknown; the message says what to do."""


def on_colab() -> bool:
    """Whether this kernel runs on Colab (it imports ``google.colab`` at start)."""
    return "google.colab" in sys.modules


def _raw_base(repository: str) -> str:
    if os.environ.get(RAW_ENV):
        return os.environ[RAW_ENV].rstrip("/") + "/"
    name, _, branch = repository.partition("@")
    return f"https://raw.githubusercontent.com/{name}/{branch or 'main'}/"


def site_file(path: str, repository: str) -> str | None:
    """The text of the site's file ``path`` (e.g. ``_data/results/<slug>.json``): from the
    checkout the library runs from, else downloaded; None when the site has no such file."""
    root = context.current().project_root()
    if (root / "_config.yml").is_file() and not os.environ.get(RAW_ENV):
        local = root / path
        return local.read_text(encoding="utf-8") if local.is_file() else None
    url = _raw_base(repository) + path
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise ColabError(f"{url}: HTTP {exc.code}; check the repository@branch in the first cell") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ColabError(f"{url} cannot be read ({exc}); check the network and the repository@branch "
                         "in the first cell") from None


def published(slug: str, repository: str) -> dict[str, Any] | None:
    """The post's published results record; None for a post not yet published."""
    text = site_file(f"_data/results/{slug}.json", repository)
    return json.loads(text) if text else None


def ran_with(record: Mapping[str, Any] | None) -> dict[str, str]:
    """``{library: version}`` the record's run used, for :data:`LIBRARIES`."""
    found = (record or {}).get("provenance") or {}
    return {name: str(found[name]) for name in LIBRARIES if found.get(name)}


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def setup(slug: str, repository: str) -> dict[str, str]:
    """Say what the post ran with and, on Colab, install what differs; return ``{library:
    version}`` of the post's run (empty for a post not yet published). Under the publisher the
    run being published is the post: it names its own versions."""
    if context.current().slug is not None:
        mine = {k: v for k in LIBRARIES if (v := _installed(k))}
        print(f"This post ran with {', '.join(f'{k} {v}' for k, v in mine.items())}.")
        return mine
    record = published(slug, repository)
    wanted = ran_with(record)
    if not wanted:
        print(f"{slug} is not published yet: nothing to pin; running with what this runtime has.")
        return {}
    device = (record.get("provenance") or {}).get("device", "unknown hardware")
    print(f"The post ran with {', '.join(f'{k} {v}' for k, v in wanted.items())} "
          f"({record.get('profile')} profile, {device}).")
    differ = {k: v for k, v in wanted.items() if _installed(k) != v}
    if not differ:
        print("This runtime has the same versions.")
    elif not on_colab():
        print("Here: " + ", ".join(f"{k} {_installed(k) or 'missing'}" for k in differ)
              + " (install the post's versions to compare like with like).")
    else:
        specs = install_specs(differ, driver_cuda_major() if provenance.gpu_present() else None)
        print("Installing " + " ".join(specs))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *specs], check=True)
    return wanted


#: Where PyTorch's CUDA 12 builds are (PyPI's Linux torch wheels are CUDA 13 builds, which a CUDA 12
#: driver cannot run); requirements-gpu-cuda12.txt takes the same index.
TORCH_CUDA12_INDEX = "https://download.pytorch.org/whl/cu128"


def driver_cuda_major() -> int | None:
    """The CUDA major version the NVIDIA driver supports (``nvidia-smi``'s "CUDA Version"), or None."""
    try:
        shown = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"CUDA Version:\s*(\d+)", shown)
    return int(found.group(1)) if found else None


def install_specs(differ: Mapping[str, str], cuda_major: int | None) -> list[str]:
    """pip's arguments that install the versions in ``differ`` ({library: version}) as builds this runtime
    can run: on a GPU whose driver supports CUDA 13, PyPI's torch and JAX's CUDA 13 plugin; on CUDA 12,
    PyTorch's CUDA 12 build from its own index and JAX's CUDA 12 plugin; on a CPU (``cuda_major`` None),
    PyPI's builds (torch's then runs on the CPU). A driver older than CUDA 12 is refused: no pinned build runs."""
    if cuda_major is not None and cuda_major < 12:
        raise ColabError(f"this runtime's NVIDIA driver supports CUDA {cuda_major}; the post's PyTorch and JAX need a "
                         "driver for CUDA 12 or 13: pick another GPU runtime, or a CPU one")
    specs, cuda12 = [], cuda_major == 12
    for name, version in differ.items():
        if name == "jax" and cuda_major is not None:
            specs.append(f"jax[cuda{cuda_major if cuda_major in (12, 13) else 13}]=={version}")
        elif name == "torch" and cuda12:
            specs.append(f"torch=={version}+cu128")
        else:
            specs.append(f"{name}=={version}")
    if "torch" in differ:
        specs.append("torchvision")  # the build that matches the pinned torch
    return specs + (["--extra-index-url", TORCH_CUDA12_INDEX] if cuda12 and "torch" in differ else [])


def parameters(slug: str, profile: str, repository: str) -> dict[str, Any]:
    """The parameters of ``profile`` for the post (see the module); {} under the publisher (papermill
    gave them)."""
    if context.current().slug is not None:
        return {}
    if profile == "auto":
        record = published(slug, repository) or {}
        profile = str(record.get("profile") or "smoke") if provenance.gpu_present() else "smoke"
    if profile not in PROFILES:
        raise ColabError(f"PROFILE = {profile!r}: choose one of {', '.join(PROFILES)} or 'auto'")
    os.environ[context.ENV["profile"]] = profile  # the processes a timing pools (sidebyside.lab.pool)
    text = site_file(SETTINGS.format(slug=slug), repository)
    chosen = ((yaml.safe_load(text) or {}) if text else {}).get(profile) or {}
    print(f"Profile {profile}: " + (", ".join(f"{k} = {v!r}" for k, v in chosen.items())
                                     or "the parameters cell as written"))
    return dict(chosen)
