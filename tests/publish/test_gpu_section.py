"""A GPU run's section, rendered from the H200 run of real-models that the site publishes (its archive is
committed in gpu-runs/): its verdicts and key figure open, every other figure and table closed at the
section's end under its title, so that the section adds a screen to its page, not another page."""

from __future__ import annotations

import json
import tarfile

import nbformat
from conftest import ROOT

from sidebyside import publish
from sidebyside.publish import gpu_section
from sidebyside.publish.rendering import site_config

ARCHIVE = ROOT / "gpu-runs" / "2026-11-28" / "gpu-run-call1-real-models.tgz"


def test_the_gpu_section_opens_with_its_verdicts_and_key_figure_and_closes_the_rest():
    with tarfile.open(ARCHIVE) as tar:
        executed = nbformat.reads(tar.extractfile("build/executed/real-models.ipynb").read().decode(), as_version=4)
        record = json.loads(tar.extractfile("build/executed/real-models.run.json").read())["record"]
    info = next(i for i in publish.discover(ROOT / "notebooks") if i.slug == "real-models")
    section, files = gpu_section.render_section(executed, record, info, site_config(ROOT, ROOT))
    assert section.startswith(gpu_section.START) and section.endswith(gpu_section.END)
    closed_from = section.index('<details class="appendix"')
    # open: the verdicts and the key figure, under its heading
    for shown in ('<ul class="gpu-verdicts">', "### The key figure", "gpu.key-table.png"):
        assert section.index(shown) < closed_from, shown
    assert "### " not in section[closed_from:]
    # closed, each under its title: the set-up (the device table), the networks, parity, FLOPs, every rung
    for title in ("Set-up: conditions, imports, the run's device and versions", "The same networks",
                  "Parity, model by model: logits, gradients in float64 and float32",
                  "FLOPs per call, by PyTorch, by XLA and as published", "Every rung of every ladder"):
        assert section.index(f"<summary>GPU run: {title}</summary>") > closed_from, title
    assert section.index("NVIDIA H200 (143771 MiB") > closed_from  # the set-up's machine kind
    assert section.count("<details") == section.count("</details>")
    assert all(name.startswith(gpu_section.PREFIX) for name in files)
