#!/usr/bin/env bash
# Prepare, on a connected machine, what an air-gapped GPU box lacks to execute the gpu profile
# of a call's posts with tools/device-run.sh. The box only executes
# (sidebyside.publish.merge.execute): the machine that publishes renders what it packs
# (`publish merge`), so nothing of the renderer goes there (no nbconvert, nh3, tinycss2):
#   .offline/wheels/        the execution wheels: papermill, jupytext, ipykernel, nbformat,
#                           nbclient, cloudpickle, torchviz, graphviz, threadpoolctl, pytest and
#                           their dependencies, for the box's Python, less what the box has
#   .offline/requirements-offline.txt   what to install there
#   .offline/fashion-mnist/ the four FashionMNIST .gz files (for FASHION_MNIST_DIR), only when
#                           one of the call's posts reads them (as their code says:
#                           sidebyside.publish.offline)
#   .offline/POSTS          the call's posts, "<slug> fashion|-" a line
#   .offline/COMMIT         the commit the copy is made from (SIDEBYSIDE_GIT_SHA on the box)
#   .offline/wheels-gpu/    only with CUDA_MAJOR=12|13: the pinned CUDA stack (several GB), for
#                           a box you copy .offline/ to yourself: no lent call can carry it
# It prints what a call carries, the tree as git ships it plus .offline/, which must stay within
# 48 MiB (a call may carry 64): over it, there is no .offline/ and the message says what to drop.
# Usage: [SLUGS=slug,slug] [CUDA_MAJOR=13] [PYTHON=.venv/bin/python] tools/prepare-offline.sh
#        [PYTHON_VERSION=3.12] [FILE listing packages the box already has]
# SLUGS: the call's posts (default: every post with a GPU section). PYTHON: reads the posts.
# DOWNLOAD_PYTHON: runs pip download (default: a python3.12, the box's version, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${1:-3.12}
has=${2:-}
out=.offline
new=build/offline.new  # made here, moved to .offline/ once it fits
py=${PYTHON:-python3}
command -v "$py" >/dev/null || py=python3  # before make setup: the machine's own
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The box has no trustworthy .git: the posts it makes are stamped with this commit. Copy a
# committed tree.
if [ -n "$(git status --porcelain --untracked-files=no -- . \
          ':(exclude)_posts' ':(exclude)images' ':(exclude)_data')" ]; then
  echo "uncommitted changes: commit them first, so that the copy is exactly the commit its" \
    "posts will name" >&2
  exit 1
fi
rm -rf "$out" "$new"
trap 'rm -rf "$new"' EXIT
mkdir -p "$new/wheels"
"$py" -m sidebyside.publish.offline posts "${SLUGS:-}" > "$new/POSTS"
echo "the call's posts (and whether each reads FashionMNIST):"
sed 's/^/  /' "$new/POSTS"
git rev-parse --short=12 HEAD > "$new/COMMIT"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform any)
# pip judges a requirement's markers (papermill's `aiohttp; python_version == "3.12"`) by the
# Python it runs on, whatever --python-version says: download with the box's version (pyenv's too)
pip_py=${DOWNLOAD_PYTHON:-}
pyenv_versions=${PYENV_ROOT:-$HOME/.pyenv}/versions
for candidate in "python$pyver" "$pyenv_versions/$pyver".*/bin/python"$pyver"; do
  [ -z "$pip_py" ] && "$candidate" -m pip --version >/dev/null 2>&1 && pip_py=$candidate
done
[ -n "$pip_py" ] || { pip_py=python3
  echo "warning: no python$pyver here: requirements marked for Python $pyver are judged by" \
    "$(python3 -V); make box-check shows what the box then lacks" >&2; }
pip_download() {
  "$pip_py" -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp \
    "${platforms[@]}" "$@"
}
# The notebook runner and its dependencies; torchviz without its (torch) dependency.
pip_download -d "$new/wheels" papermill jupytext ipykernel nbformat nbclient cloudpickle graphviz \
  pyyaml tqdm threadpoolctl pytest
pip_download -d "$new/wheels" --no-deps torchviz
# Drop what the box already has (pass a file with one name a line to override): what
# `pip install` of the box's stack (torch==2.11.*, jax==0.11.2, flax, optax, timm, matplotlib,
# numpy, scipy, pandas) brings on Python 3.12, as `make box-check` installs it, less the CUDA
# libraries.
default_has="absl-py aiofiles anyio click contourpy cycler etils filelock flax fonttools fsspec
h11 hf-xet httpcore2 httpx2 huggingface-hub humanize idna jax jaxlib jinja2 kiwisolver
markdown-it-py markupsafe matplotlib mdurl ml-dtypes mpmath msgpack networkx numpy opt-einsum
optax orbax-checkpoint packaging pandas pillow prometheus-client protobuf psutil pygments pyparsing
python-dateutil pyyaml rich safetensors scipy setuptools simplejson sympy tensorstore timm torch
torchvision tqdm treescope triton truststore typing-extensions tzdata uvloop zipp"
names=$( [ -n "$has" ] && cat "$has" || echo "$default_has" )
for name in $names; do
  pattern=$(echo "$name" | tr 'A-Z-' 'a-z_')
  find "$new/wheels" -maxdepth 1 -iname "${pattern}-[0-9]*.whl" -delete
done
ls "$new/wheels" | sed -E 's/-[0-9].*//' | sort -u > "$new/requirements-offline.txt"
if grep -q ' fashion$' "$new/POSTS"; then
  src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
  ls "$src"/*-ubyte.gz >/dev/null 2>&1 || { echo "no FashionMNIST in $src: install Debian's" \
    "dataset-fashion-mnist or set FASHION_MNIST_DIR to the folder of its four *-ubyte.gz" >&2
    exit 1; }
  mkdir -p "$new/fashion-mnist"
  cp "$src"/*-ubyte.gz "$new/fashion-mnist/"
fi
echo "what the call carries (the tree as git ships it, and .offline/):"
if ! "$py" -m sidebyside.publish.offline check "$new"; then
  [ -n "${CUDA_MAJOR:-}" ] || exit 1
  echo "(CUDA_MAJOR=$CUDA_MAJOR: this .offline/ is for a box you copy it to, not a lent call)" >&2
fi
if [ -n "${CUDA_MAJOR:-}" ]; then
  mkdir -p "$new/wheels-gpu"
  grep -v '^--' "requirements-gpu-cuda$CUDA_MAJOR.txt" > "$new/requirements-gpu.txt"
  index=$(sed -n 's/^--extra-index-url //p' "requirements-gpu-cuda$CUDA_MAJOR.txt")
  pip_download ${index:+--extra-index-url "$index"} -d "$new/wheels-gpu" \
    -r "$new/requirements-gpu.txt"
  du -sh "$new/wheels-gpu"
  echo "pinned CUDA stack on the box: python3 -m pip install --no-index" \
    "--find-links $out/wheels-gpu -r $out/requirements-gpu.txt"
fi
mv "$new" "$out"
echo "install on the box: python3 -m pip install --no-index --find-links $out/wheels" \
  "-r $out/requirements-offline.txt"
echo "run there with: SIDEBYSIDE_GIT_SHA=$(cat "$out/COMMIT")"
