#!/usr/bin/env bash
# Prepare, on a connected machine, what an air-gapped GPU box lacks to run
# `make execute PROFILE=gpu PYTHON=python3 SETUP=0`:
#   .offline/wheels/                 papermill, nbconvert, jupytext, ipykernel, torchviz, graphviz
#                                    and their dependencies, for the box's Python, less what it has
#   .offline/requirements-offline.txt   what to install there
#   .offline/fashion-mnist/          the four FashionMNIST .gz files (for FASHION_MNIST_DIR)
# Usage: tools/prepare-offline.sh [PYTHON_VERSION=3.12] [FILE listing packages the box already has]
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${1:-3.12}
has=${2:-}
out=.offline
rm -rf "$out" && mkdir -p "$out/wheels" "$out/fashion-mnist"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
pip_download() {
  python3 -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp "${platforms[@]}" -d "$out/wheels" "$@"
}
# The notebook runner and its dependencies; torchviz without its (torch) dependency.
pip_download papermill nbconvert jupytext ipykernel nbformat nbclient graphviz pyyaml tqdm
pip_download --no-deps torchviz
# Drop what the box already has (a GPU image ships these; pass a file with one name a line to override).
default_has="numpy scipy pandas matplotlib torch jax jaxlib flax optax pyyaml tqdm jinja2 markupsafe pygments
packaging attrs six python-dateutil typing-extensions requests urllib3 idna certifi charset-normalizer
click psutil pillow fonttools kiwisolver cycler contourpy pyparsing rich markdown-it-py mdurl setuptools
tabulate regex filelock fsspec networkx sympy mpmath"
names=$( [ -n "$has" ] && cat "$has" || echo "$default_has" )
for name in $names; do
  pattern=$(echo "$name" | tr 'A-Z-' 'a-z_')
  find "$out/wheels" -maxdepth 1 -iname "${pattern}-[0-9]*.whl" -delete
done
ls "$out/wheels" | sed -E 's/-[0-9].*//' | sort -u > "$out/requirements-offline.txt"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
cp "$src"/*-ubyte.gz "$out/fashion-mnist/"
du -sh "$out/wheels" "$out/fashion-mnist"
echo "install on the box: python3 -m pip install --no-index --find-links $out/wheels -r $out/requirements-offline.txt"
