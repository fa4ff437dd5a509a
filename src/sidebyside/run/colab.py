"""A post's notebook run by a reader (on Colab, or any Jupyter), as the post ran it, and compared.

Three cells of every notebook call it, each naming the post's slug and the site's repository
(``owner/name@branch``, the ``repository`` and ``branch`` settings of ``_config.yml``):

- :func:`setup`, in the first code cell, shown in the post and on Colab: says which versions of
  PyTorch, JAX, Flax and optax the post ran with (its published record's provenance) and on
  Colab installs those where the runtime's differ (JAX with its CUDA 12 plugin on a GPU runtime).
- :func:`parameters`, in the profile cell after the parameters cell: a profile's parameters
  (``params/<profile>.yaml``): ``"smoke"`` (the parameters cell as written), ``"cpu"``, or
  ``"gpu"`` (a GPU post's own settings); ``"auto"`` picks the post's own profile on a GPU
  runtime and smoke elsewhere. It also names the profile to the run context, so that timings pool
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
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import yaml

from sidebyside.run import context, provenance

__all__ = ["RAW_ENV", "LIBRARIES", "on_colab", "site_file", "published", "ran_with", "setup", "parameters",
           "ColabError"]

#: Where a site's raw files are downloaded from, when set (a mirror, a test's local server).
RAW_ENV = "SIDEBYSIDE_RAW"
#: The libraries a post pins, as its provenance names them.
LIBRARIES = ("torch", "jax", "jaxlib", "flax", "optax")
PROFILES = ("smoke", "cpu", "gpu")


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
        gpu = provenance.gpu_present()
        specs = [f"jax[cuda12]=={v}" if k == "jax" and gpu else f"{k}=={v}" for k, v in differ.items()]
        if "torch" in differ:
            specs.append("torchvision")  # the build that matches the pinned torch
        print("Installing " + " ".join(specs))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *specs], check=True)
    return wanted


def parameters(slug: str, profile: str, repository: str) -> dict[str, Any]:
    """The parameters of ``profile`` for the post (see the module); {} under the publisher and
    for the smoke profile, whose parameters the parameters cell holds."""
    if context.current().slug is not None:
        return {}
    if profile == "auto":
        record = published(slug, repository) or {}
        profile = str(record.get("profile") or "smoke") if provenance.gpu_present() else "smoke"
    if profile not in PROFILES:
        raise ColabError(f"PROFILE = {profile!r}: choose one of {', '.join(PROFILES)} or 'auto'")
    os.environ[context.ENV["profile"]] = profile  # the processes a timing pools (sidebyside.lab.pool)
    text = site_file(f"params/{profile}.yaml", repository)
    chosen = ((yaml.safe_load(text) or {}) if text else {}).get(slug) or {}
    print(f"Profile {profile}: " + (", ".join(f"{k} = {v!r}" for k, v in chosen.items())
                                     or "the parameters cell as written"))
    return dict(chosen)
