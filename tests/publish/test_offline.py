"""What a call to the GPU box carries (sidebyside.publish.offline, tools/prepare-offline.sh): the
tree as git ships it plus .offline/, refused over 48 MiB with what to drop, and FashionMNIST only
for the posts whose code reads it. Nothing is downloaded: the script's `pip download` is a stand-in
that writes wheels of a given size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sidebyside.publish import offline
from sidebyside.publish.common import ROOT

MIB = offline.MIB
#: What ``make offline`` downloaded for Python 3.12, less the box's stack: 54 wheels, 18.7 MiB.
TYPICAL_WHEELS = 19_600_000
DATA_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def _git(tree: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def _sized(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))  # random: git stores it at its size, as it ships it


def _notebook(tree: Path, number: int, slug: str, code: str, gpu: bool = True) -> None:
    header = textwrap.dedent(f"""\
        # ---
        # jupyter:
        #   kernelspec:
        #     name: python3
        #   sidebyside:
        #     slug: {slug}
        #     title: {slug}
        #     date: '2026-12-02'
        #     description: A test post.
        #     compared: Nothing, a test post.
        #     metrics: [total]
        # ---

        # %% tags=["parameters"]
        n = 1

        # %%
        """)
    (tree / "notebooks").mkdir(parents=True, exist_ok=True)
    (tree / "notebooks" / f"{number:02d}_{slug.replace('-', '_')}.py").write_text(header + code)
    if gpu:
        (tree / "params").mkdir(exist_ok=True)
        (tree / "params" / f"{slug}.yaml").write_text(
            "gpu_budget: {budget_s: 100, measured: test}\n"
        )


def _tree(tmp_path: Path, tracked_bytes: int = 0) -> Path:
    """A committed git tree: two GPU posts, one reading FashionMNIST through a post module, one not;
    a third that reads it but has no GPU section; the library's src/ and the script."""
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    (tree / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "prepare-offline.sh", tree / "tools")
    (tree / ".gitignore").write_text("/.offline/\n/build/\n")
    own = tree / "src" / "sidebyside" / "posts" / "reader"
    own.mkdir()
    (own / "__init__.py").write_text('"""A test post\'s module."""\nfrom .inputs import images\n')
    (own / "inputs.py").write_text(
        '"""Its data."""\nfrom sidebyside.lab import data\n\n\n'
        "def images():\n    return data.load().X_train\n"
    )
    _notebook(tree, 1, "reader", "from sidebyside.posts.reader import images\nX = images()\n")
    _notebook(
        tree,
        2,
        "shuffler",
        "from sidebyside.lab import data\norder = data.epoch_permutation(0, 1)\n",
    )
    _notebook(
        tree, 3, "cpu-only", "from sidebyside.lab import data as d\nds = d.load()\n", gpu=False
    )
    if tracked_bytes:
        _sized(tree / "images" / "big.bin", tracked_bytes)
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-qm", "tree")
    return tree


def _fake_python(tmp_path: Path) -> Path:
    """A python3 for PATH whose `-m pip download -d DIR` writes a wheel of $WHEEL_BYTES in DIR."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        textwrap.dedent(f"""\
        #!/usr/bin/env bash
        if [ "$1 $2 $3" = "-m pip download" ]; then
          while [ "$1" != "-d" ]; do shift; done
          head -c "$WHEEL_BYTES" /dev/urandom > "$2/papermill-9.9-py3-none-any.whl"
          exit 0
        fi
        exec {sys.executable} "$@"
        """)
    )
    (bin_dir / "python3").chmod(0o755)
    return bin_dir


def _prepare(
    tree: Path, tmp_path: Path, wheel_bytes: int, slugs: str = ""
) -> subprocess.CompletedProcess:
    data = tmp_path / "fashion"
    for name in DATA_FILES:
        _sized(data / name, 6 * MIB)
    env = {
        **os.environ,
        "PATH": f"{_fake_python(tmp_path)}:{os.environ['PATH']}",
        "WHEEL_BYTES": str(wheel_bytes),
        "FASHION_MNIST_DIR": str(data),
        "DOWNLOAD_PYTHON": "python3",
        "SLUGS": slugs,
        "PYTHON": sys.executable,
    }
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        ["bash", "tools/prepare-offline.sh", "3.12"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_posts_that_read_fashion_mnist_are_derived_from_their_code(tmp_path):
    tree = _tree(tmp_path)
    gpu = offline.call_posts(None, tree / "notebooks", tree / "src")
    assert gpu == [("reader", True), ("shuffler", False)]  # cpu-only has no GPU section
    assert offline.call_posts("cpu-only", tree / "notebooks", tree / "src") == [("cpu-only", True)]


def test_the_real_posts_that_ran_with_fashion_mnist_are_among_those_derived():
    """Each published run that read FashionMNIST (its record's inputs) is of a post that the code
    says reads it."""
    derived = {
        slug
        for slug, reads in offline.call_posts(",".join(_published()), ROOT / "notebooks")
        if reads
    }
    recorded = {
        slug
        for slug, inputs in _published().items()
        if any("fashion-mnist" in name for name in inputs.get("data", {}))
    }
    assert recorded, "no published run read FashionMNIST: the check below would prove nothing"
    assert recorded <= derived
    assert "grid-sample-parity" not in derived


def _published() -> dict[str, dict]:
    from sidebyside.publish.discovery import discover

    slugs = {i.slug for i in discover(ROOT / "notebooks")}
    records = {
        p.stem: json.loads(p.read_text()) for p in (ROOT / "_data" / "results").glob("*.json")
    }
    return {slug: r.get("inputs", {}) for slug, r in records.items() if slug in slugs}


def test_the_tree_counts_tracked_and_unignored_files_at_their_git_size(tmp_path):
    tree = _tree(tmp_path, tracked_bytes=3 * MIB)
    before, files, by_top = offline.tree_bytes(tree)
    assert by_top["images/"] == 3 * MIB
    _sized(tree / "loose.bin", MIB)  # untracked, not ignored: a call carries it
    _sized(tree / "build" / "out.bin", MIB)  # ignored: it stays behind
    after, more, _ = offline.tree_bytes(tree)
    assert (after - before, more - files) == (MIB, 1)


def test_check_refuses_over_48_mib_naming_the_posts_to_drop(tmp_path):
    tree = _tree(tmp_path, tracked_bytes=20 * MIB)
    dot = tmp_path / "dot-offline"
    _sized(dot / "wheels" / "a.whl", 10 * MIB)
    _sized(dot / "fashion-mnist" / DATA_FILES[0], 20 * MIB)
    (dot / offline.DATA_FILE).write_text("reader fashion\nshuffler -\n")
    carry = offline.measure(dot, root=tree)
    assert carry.total > 48 * MIB and carry.fashion == ("reader",)
    ok, lines = offline.check(carry)
    assert not ok
    assert (
        "Drop the posts that read FashionMNIST (reader) from SLUGS (SLUGS=shuffler)"
        in "\n".join(lines)
    )
    shutil.rmtree(dot / "fashion-mnist")
    ok, lines = offline.check(offline.measure(dot, root=tree))
    assert ok and "of 48 MiB allowed" in lines[-1]


def test_check_without_posts_to_drop_names_the_largest_tracked_folders(tmp_path):
    tree = _tree(tmp_path, tracked_bytes=40 * MIB)
    dot = tmp_path / "dot-offline"
    _sized(dot / "wheels" / "a.whl", 10 * MIB)
    ok, lines = offline.check(offline.measure(dot, root=tree))
    assert not ok and "largest: images/ 40.0 MiB" in lines[-1]
    assert offline.main(["check", str(dot)], root=tree) == 3


def test_the_committed_tree_and_the_wheels_fit_but_not_with_fashion_mnist():
    """The real tree as git ships it, with the execution wheels' measured size, fits 48 MiB;
    with the four FashionMNIST files (29.4 MiB) it does not."""
    tree, files, _ = offline.tree_bytes(ROOT)
    assert files > 100
    carry = offline.Carry(tree=tree, wheels=TYPICAL_WHEELS, data=0, other=2000)
    assert offline.check(carry)[0], f"{carry.total / MIB:.1f} MiB without FashionMNIST"
    heavy = offline.Carry(
        tree=tree,
        wheels=TYPICAL_WHEELS,
        data=30_878_551,
        other=2000,
        posts=("a", "b"),
        fashion=("a",),
    )
    assert not offline.check(heavy)[0]


@pytest.mark.parametrize("slugs, data", [("", True), ("shuffler", False)])
def test_make_offline_carries_fashion_mnist_only_for_posts_that_read_it(tmp_path, slugs, data):
    tree = _tree(tmp_path)
    done = _prepare(tree, tmp_path, wheel_bytes=MIB, slugs=slugs)
    assert done.returncode == 0, done.stderr
    assert (tree / ".offline" / "fashion-mnist").is_dir() == data
    assert (tree / ".offline" / "requirements-offline.txt").read_text() == "papermill\n"
    assert "total" in done.stdout and "of 48 MiB allowed" in done.stdout


def test_make_offline_refuses_over_48_mib_and_leaves_no_offline(tmp_path):
    tree = _tree(tmp_path)
    (tree / ".offline").mkdir()  # an earlier one, of another commit: it goes too
    done = _prepare(tree, tmp_path, wheel_bytes=30 * MIB)  # 30 + 24 of data
    assert done.returncode == 1
    assert (
        "refused:" in done.stderr
        and "Drop the posts that read FashionMNIST (reader)" in done.stderr
    )
    assert not (tree / ".offline").exists() and not (tree / "build" / "offline.new").exists()


def test_the_arithmetic_imports_neither_torch_nor_jax():
    code = (
        "import sys; from sidebyside.publish import offline; offline.call_posts(None); "
        "print(sorted(m for m in ('torch', 'jax') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
