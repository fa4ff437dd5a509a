#!/usr/bin/env bash
# Prepare, on a connected machine, what an air-gapped GPU box lacks to execute the gpu profile with
# tools/device-run.sh. The box only executes (sidebyside.publish.merge.execute): the machine that publishes renders
# what it packs (`publish merge`), so nothing of the renderer goes there (no nbconvert, nh3, tinycss2):
#   .offline/wheels/                 the execution wheels: papermill, jupytext, ipykernel, nbformat, nbclient, cloudpickle,
#                                    torchviz, graphviz, threadpoolctl, pytest and their dependencies (markdown-it-py
#                                    comes as jupytext's), for the box's Python, less what it has
#   .offline/requirements-offline.txt   what to install there
#   .offline/fashion-mnist/          the four FashionMNIST .gz files (for FASHION_MNIST_DIR)
#   .offline/COMMIT                  the commit the copy is made from (for SIDEBYSIDE_GIT_SHA on the box)
#   .offline/wheels-gpu/             only with CUDA_MAJOR=12|13: the pinned CUDA stack (requirements-gpu-cudaNN.txt,
#                                    several GB), for a box that should run the pins rather than its own stack
# Usage: [CUDA_MAJOR=13] tools/prepare-offline.sh [PYTHON_VERSION=3.12] [FILE listing packages the box already has]
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${1:-3.12}
has=${2:-}
out=.offline
# The box has no trustworthy .git: the posts it makes are stamped with this commit. Copy a committed tree.
if [ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)_posts' ':(exclude)images' ':(exclude)_data')" ]; then
  echo "uncommitted changes: commit them first, so that the copy is exactly the commit its posts will name" >&2
  exit 1
fi
rm -rf "$out" && mkdir -p "$out/wheels" "$out/fashion-mnist"
git rev-parse --short=12 HEAD > "$out/COMMIT"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
pip_download() {
  python3 -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp "${platforms[@]}" -d "$out/wheels" "$@"
}
# The notebook runner and its dependencies; torchviz without its (torch) dependency.
pip_download papermill jupytext ipykernel nbformat nbclient cloudpickle graphviz pyyaml tqdm threadpoolctl pytest
pip_download --no-deps torchviz
# Drop what the box already has (a GPU image ships these; pass a file with one name a line to override). Not
# markdown-it-py and mdurl: the box lacks them, and jupytext needs them installed (it runs without importing them).
default_has="numpy scipy pandas matplotlib torch jax jaxlib flax optax timm pyyaml tqdm jinja2 markupsafe pygments
packaging attrs six python-dateutil typing-extensions requests urllib3 idna certifi charset-normalizer
click psutil pillow fonttools kiwisolver cycler contourpy pyparsing setuptools
tabulate regex filelock fsspec networkx sympy mpmath"
names=$( [ -n "$has" ] && cat "$has" || echo "$default_has" )
for name in $names; do
  pattern=$(echo "$name" | tr 'A-Z-' 'a-z_')
  find "$out/wheels" -maxdepth 1 -iname "${pattern}-[0-9]*.whl" -delete
done
ls "$out/wheels" | sed -E 's/-[0-9].*//' | sort -u > "$out/requirements-offline.txt"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
cp "$src"/*-ubyte.gz "$out/fashion-mnist/"
if [ -n "${CUDA_MAJOR:-}" ]; then
  mkdir -p "$out/wheels-gpu"
  grep -v '^--' "requirements-gpu-cuda$CUDA_MAJOR.txt" > "$out/requirements-gpu.txt"
  index=$(sed -n 's/^--extra-index-url //p' "requirements-gpu-cuda$CUDA_MAJOR.txt")
  python3 -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp "${platforms[@]}" \
    ${index:+--extra-index-url "$index"} -d "$out/wheels-gpu" -r "$out/requirements-gpu.txt"
  du -sh "$out/wheels-gpu"
  echo "pinned CUDA stack on the box: python3 -m pip install --no-index --find-links $out/wheels-gpu -r $out/requirements-gpu.txt"
fi
du -sh "$out/wheels" "$out/fashion-mnist"
echo "install on the box: python3 -m pip install --no-index --find-links $out/wheels -r $out/requirements-offline.txt"
echo "run there with: SIDEBYSIDE_GIT_SHA=$(cat "$out/COMMIT")"
