"""`publish merge` on synthetic archives of GPU calls (executed notebooks and their
records, rendered where they are merged; the renderer stands in): a good merge;
mixed commits, stacks or devices refused; another version of a notebook refused;
a missing post reported; a corrupt archive or a post that cannot be rendered
refused with nothing published changed."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from sidebyside.publish import gpu_section
from sidebyside.publish import merge as merging
from sidebyside.publish.cache import cache_key
from sidebyside.publish.cli import main
from sidebyside.publish.common import ROOT, PublishError
from sidebyside.publish.discovery import discover
from sidebyside.publish.params import load_params
from sidebyside.run import runkey

NOTEBOOKS = ROOT / "notebooks"
INFOS = {i.slug: i for i in discover(NOTEBOOKS)}
DATES = {slug: info.date for slug, info in INFOS.items()}
GPU_PARAMS = load_params(ROOT / "params", "gpu", discover(ROOT / "notebooks"))
INPUTS = {"modules": {"src/sidebyside/run/context.py": runkey.digest(ROOT / "src" / "sidebyside" / "run" / "context.py")},
          "data": {}}
A, B = "jit-and-autograd-timing", "xla-and-scipy"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
STACK = {"python": "3.12.3", "torch": "2.11.0", "jax": "0.11.2", "jaxlib": "0.11.2", "flax": "0.12.10",
         "optax": "0.2.8", "numpy": "2.5.2", "torch_cuda": "13.0", "torch_cudnn": "9.19.0", "jax_cuda": "13.0",
         "jax_cudnn": "9.19.0"}
GPU = "NVIDIA H100 80GB HBM3"


def _record(slug, *, commit=COMMIT[:12], stack=None, torch_device=GPU, jax_device=GPU):
    """A gpu run's record whose key is the one this tree gives its notebook."""
    return {"slug": slug, "profile": "gpu", "executed_at": "2026-11-24T22:00:00+00:00", "inputs": INPUTS,
            "source_hash": cache_key(INFOS[slug], "gpu", GPU_PARAMS[slug], ROOT, INPUTS), "metrics": {"which": slug},
            "provenance": {**(stack or STACK), "git_sha": commit, "torch_device": torch_device,
                           "jax_device": jax_device, "device": GPU, "device_kind": "gpu"}}


def _render(notebook, record, info, config, root):
    """The renderer's stand-in: the GPU section says which executed notebook it came from."""
    return (f"{gpu_section.START}\nthe post of {json.loads(notebook)['metadata']['which']}\n{gpu_section.END}",
            {"gpu.figure.png": f"png of {record['provenance']['git_sha']}".encode()})


@pytest.fixture(autouse=True)
def _renderer(monkeypatch):
    monkeypatch.setattr(merging, "_render", _render)


def _tgz(files):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, payload in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def _archive(path, records, *, commit=COMMIT, stack=None, planned=None, published=None, stub=False, extra=None,
             drop=()):
    """Write an archive like tools/device-run.sh's: each record's executed notebook and run record, and checkpoints."""
    files = {}
    for slug, record in records.items():
        notebook = json.dumps({"cells": [], "metadata": {"which": f"{slug} at {commit}"}, "nbformat": 4,
                               "nbformat_minor": 5}).encode()
        files[f"build/executed/{slug}.ipynb"] = notebook
        files[f"build/executed/{slug}.run.json"] = json.dumps(
            {"record": record, "executed_sha256": hashlib.sha256(notebook).hexdigest()}).encode()
        files[f"checkpoints/{slug}.json"] = json.dumps({"part": {"seconds": 1.0, "commit": commit}}).encode()
    manifest = {"commit": commit, "stack": stack or STACK, "device": GPU, "planned": planned or list(records),
                "executed": list(records) if published is None else published, "started": "2026-11-24T21:59:00+00:00",
                "call": path.stem, "stub": stub}
    files[merging.MANIFEST] = json.dumps(manifest).encode()
    files.update(extra or {})
    for name in drop:
        files.pop(name)
    path.write_bytes(_tgz(files))
    return path


@pytest.fixture
def site(tmp_path):
    """A site that already publishes an older run of A."""
    site = tmp_path / "site"
    (site / "_posts").mkdir(parents=True)
    (site / "images" / A).mkdir(parents=True)
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_posts" / f"{DATES[A]}-{A}.md").write_text("the old post\n")
    (site / "images" / A / "old.png").write_bytes(b"old png")
    (site / "_data" / "results" / f"{A}.json").write_text(json.dumps(_record(A, commit="feedfacecafe")))
    return site


def _snapshot(site):
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*"))
            if p.is_file() and ".sidebyside" not in p.parts}


def test_a_good_merge_renders_and_publishes_every_post_of_every_call(site, tmp_path):
    one = _archive(tmp_path / "gpu-run-call1.tgz", {A: _record(A)})
    two = _archive(tmp_path / "gpu-run-call2.tgz", {B: _record(B)})
    build = tmp_path / "build"
    merged = merging.merge([one, two], site=site, notebooks=NOTEBOOKS, build=build)
    assert merged.published == {A: one.name, B: two.name} and merged.missing == {}
    for slug in (A, B):
        assert f"the post of {slug} at {COMMIT}" in (site / "_posts" / f"{DATES[slug]}-{slug}.md").read_text()
        assert json.loads((site / "_data" / "results" / f"{slug}.json").read_text()) == _record(slug)
        # old.png went with its run; the downloads hold the record and the manifest names every file
        assert sorted(p.name for p in (site / "images" / slug).iterdir()) == ["gpu.figure.png", "manifest.json",
                                                                                "results.json"]
        assert json.loads((site / "checkpoints" / f"{slug}.json").read_text())["part"]["commit"] == COMMIT
        # the executed notebook is kept where `make render` renders it again from
        assert json.loads((build / "executed" / f"{slug}.gpu.run.json").read_text())["record"] == _record(slug)
    assert not (site / ".sidebyside").exists() or not list((site / ".sidebyside").glob("journal-*"))


@pytest.mark.parametrize("case", ["commits", "stacks", "devices", "record commit", "twice", "stub", "profile",
                                  "version"])
def test_mixed_archives_are_refused_with_nothing_changed(site, tmp_path, case):
    other_stack = {**STACK, "jax": "0.10.2"}
    one = _archive(tmp_path / "one.tgz", {A: _record(A)})
    two = {
        "commits": lambda p: _archive(p, {B: _record(B, commit="fedcba987654")}, commit="fedcba9876543210"),
        "stacks": lambda p: _archive(p, {B: _record(B, stack=other_stack)}, stack=other_stack),
        "devices": lambda p: _archive(p, {B: _record(B, jax_device="NVIDIA A100-SXM4-80GB")}),
        "record commit": lambda p: _archive(p, {B: _record(B, commit="fedcba987654")}),
        "twice": lambda p: _archive(p, {A: _record(A)}),
        "stub": lambda p: _archive(p, {B: _record(B)}, stub=True),
        "profile": lambda p: _archive(p, {B: {**_record(B), "profile": "cpu"}}),
        "version": lambda p: _archive(p, {B: {**_record(B), "source_hash": "another notebook's key"}}),
    }[case](tmp_path / "two.tgz")
    before = _snapshot(site)
    with pytest.raises(PublishError, match="nothing was changed") as refused:
        merging.merge([one, two], site=site, notebooks=NOTEBOOKS, build=tmp_path / "build")
    said = {"commits": "mixed commits", "stacks": "differ in jax (0.11.2 / 0.10.2)", "devices": "mixed device kinds",
            "record commit": "mixed commits within one post", "twice": "measured twice", "stub": "stub executor",
            "profile": "holds a cpu run of it", "version": "ran another version of it than this tree holds"}
    assert said[case] in str(refused.value)
    assert _snapshot(site) == before


def test_a_missing_post_is_reported_and_the_rest_merged(site, tmp_path, capsys):
    archive = _archive(tmp_path / "call1.tgz", {A: _record(A)}, planned=[A, B], published=[A])
    merged = merging.merge([archive], site=site, notebooks=NOTEBOOKS, build=tmp_path / "build",
                           expect=["swin-transformer-v2"])
    assert list(merged.published) == [A]
    assert set(merged.missing) == {B, "swin-transformer-v2"}
    assert "call1.tgz planned it and did not execute it" in merged.missing[B]
    assert merged.missing["swin-transformer-v2"] == "no archive planned it"

    args = ["merge", str(archive), "--site", str(site), "--notebooks", str(NOTEBOOKS),
            "--build", str(tmp_path / "build")]
    assert main(args) == 1
    assert f"missing: {B}" in capsys.readouterr().err
    assert main([*args, "--allow-missing"]) == 0


def test_a_later_call_does_not_bring_back_another_posts_older_parts(site, tmp_path):
    """Call 2 ran B from a tree that did not hold call 1's parts of A yet: its copy of A's checkpoint file is the
    old one, and A's parts are call 1's (as on the H200 on 2026-11-28)."""
    one = _archive(tmp_path / "gpu-run-call1.tgz", {A: _record(A)})
    old = json.dumps({"part": {"seconds": 9.0, "commit": "feedfacecafe"}}).encode()
    two = _archive(tmp_path / "gpu-run-call2.tgz", {}, planned=[B], published=[],
                   extra={f"checkpoints/{A}.json": old, f"checkpoints/{B}.json": b'{"b": {"seconds": 2.0}}'})
    # the same start: call 2 is merged last
    merged = merging.merge([one, two], site=site, notebooks=NOTEBOOKS, build=tmp_path / "build")
    assert list(merged.published) == [A] and set(merged.missing) == {B}
    assert json.loads((site / "checkpoints" / f"{A}.json").read_text())["part"]["commit"] == COMMIT
    # B's parts, measured before it was stopped, come back for its next call
    assert json.loads((site / "checkpoints" / f"{B}.json").read_text()) == {"b": {"seconds": 2.0}}


@pytest.mark.parametrize("damage", ["truncated", "not gzip", "outside", "link", "no manifest", "no record",
                                    "bad record", "other notebook", "a post of its own"])
def test_a_corrupt_archive_is_refused_with_nothing_published_changed(site, tmp_path, damage):
    good = _archive(tmp_path / "good.tgz", {A: _record(A)})
    bad = tmp_path / "bad.tgz"
    if damage == "truncated":
        payload = _archive(bad, {B: _record(B)}).read_bytes()
        bad.write_bytes(payload[: len(payload) // 2])
    elif damage == "not gzip":
        bad.write_bytes(b"this is no archive")
    elif damage == "outside":
        _archive(bad, {B: _record(B)}, extra={"../_posts/evil.md": b"x"})
    elif damage == "link":
        _archive(bad, {B: _record(B)})
        with tarfile.open(bad, "r:gz") as tar:
            members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
        link = tarfile.TarInfo(f"build/executed/{B}.png")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        with tarfile.open(bad, "w:gz") as tar:
            for member, data in members:
                tar.addfile(member, io.BytesIO(data))
            tar.addfile(link)
    elif damage == "no manifest":
        _archive(bad, {B: _record(B)}, drop=[merging.MANIFEST])
    elif damage == "no record":
        _archive(bad, {B: _record(B)}, drop=[f"build/executed/{B}.run.json"])
    elif damage == "bad record":
        _archive(bad, {B: _record(B)}, extra={f"build/executed/{B}.run.json": b"{not json"})
    elif damage == "other notebook":  # the executed notebook is not the one its run record names
        _archive(bad, {B: _record(B)}, extra={f"build/executed/{B}.ipynb": b'{"cells": []}'})
    elif damage == "a post of its own":  # the box renders nothing: an archive holding a post is no call's
        _archive(bad, {B: _record(B)}, extra={f"_posts/{DATES[B]}-{B}.md": b"x"})
    before = _snapshot(site)
    with pytest.raises(PublishError) as refused:
        merging.merge([good, bad], site=site, notebooks=NOTEBOOKS, build=tmp_path / "build")
    assert "nothing was" in str(refused.value) and "bad.tgz" in str(refused.value)
    assert _snapshot(site) == before
    assert main(["merge", str(good), str(bad), "--site", str(site), "--notebooks", str(NOTEBOOKS),
                 "--build", str(tmp_path / "build")]) == 2
    assert _snapshot(site) == before


def test_a_post_that_cannot_be_rendered_publishes_nothing(site, tmp_path, monkeypatch):
    def refuse(notebook, record, info, config, root):
        if info.slug == B:
            raise PublishError(f"{info.path}: the lint refuses line 3")
        return _render(notebook, record, info, config, root)

    monkeypatch.setattr(merging, "_render", refuse)
    one = _archive(tmp_path / "one.tgz", {A: _record(A)})
    two = _archive(tmp_path / "two.tgz", {B: _record(B)})
    before = _snapshot(site)
    with pytest.raises(PublishError, match=rf"nothing was changed: {B} \(in two.tgz\) cannot be rendered.*line 3"):
        merging.merge([one, two], site=site, notebooks=NOTEBOOKS, build=tmp_path / "build")
    assert _snapshot(site) == before and not (tmp_path / "build").exists()


def _executed(build, slug, record):
    notebook = build / "executed" / f"{slug}.ipynb"
    notebook.parent.mkdir(parents=True, exist_ok=True)
    notebook.write_text('{"cells": []}')
    (build / "executed" / f"{slug}.run.json").write_text(json.dumps(
        {"record": record, "executed_sha256": hashlib.sha256(notebook.read_bytes()).hexdigest()}))


def test_the_manifest_records_what_the_call_executed(tmp_path):
    build = tmp_path / "build"
    _executed(build, A, _record(A))
    stale = _record(B)
    stale["executed_at"] = "2026-11-01T00:00:00+00:00"  # an earlier run's record: not executed by this call
    _executed(build, B, stale)
    naive = {**_record("swin-transformer-v2"), "executed_at": "2026-11-24T22:00:00"}  # no time zone: not this call's
    _executed(build, "swin-transformer-v2", naive)
    _executed(build, "real-models", _record("real-models"))
    (build / "executed" / "real-models.ipynb").write_text("changed after its run")  # not a completed run
    manifest = merging.write_manifest(tmp_path / "m.json", site=tmp_path, commit=COMMIT,
                                      planned=[A, B, A, "swin-transformer-v2", "real-models"],
                                      started="2026-11-24T21:00:00+00:00", devices={"torch_device": GPU,
                                                                                    "torch_cuda": "13.0"})
    assert manifest["planned"] == [A, B, "swin-transformer-v2", "real-models"] and manifest["executed"] == [A]
    assert manifest["device"] == GPU and manifest["stack"]["torch_cuda"] == "13.0"
    assert set(manifest["stack"]) == set(merging.STACK_KEYS)
    assert json.loads((tmp_path / "m.json").read_text()) == manifest


def test_a_merged_gpu_run_is_a_section_beside_the_published_cpu_run(tmp_path):
    """Merging replaces nothing of the cpu run: its body, figures and record stay; the GPU run adds its section
    (before the appendix), its files and its place in the record."""
    from sidebyside.publish import records
    from sidebyside.publish.site import publish

    site = tmp_path / "site"
    cpu = {"slug": A, "profile": "cpu", "executed_at": "2026-11-26T10:00:00+00:00", "source_hash": "k",
           "provenance": {"device": "AMD EPYC (2 cores)", "device_kind": "cpu", "git_sha": "c0ffee"}, "metrics": {}}
    body = "---\ntitle: t\n---\n\nThe cpu run's body.\n\n## Appendix {#appendix}\n\nIts appendix.\n"
    publish(site, INFOS[A], body, {"body.png": b"cpu png"}, cpu)
    merged = merging.merge([_archive(tmp_path / "gpu-run.tgz", {A: _record(A)})], site=site, notebooks=NOTEBOOKS,
                           build=tmp_path / "build")
    assert merged.published == {A: "gpu-run.tgz"}
    post = (site / "_posts" / f"{DATES[A]}-{A}.md").read_text()
    assert post.index("The cpu run's body.") < post.index(f"the post of {A} at {COMMIT}") < post.index("Its appendix.")
    assert (site / "images" / A / "body.png").read_bytes() == b"cpu png"
    assert (site / "images" / A / "gpu.figure.png").is_file()
    record = json.loads((site / "_data" / "results" / f"{A}.json").read_text())
    assert records.split_runs(record) == (cpu, _record(A))
