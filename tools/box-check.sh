#!/usr/bin/env bash
# make box-check: rehearse, on a connected machine without a GPU, what a call to the air-gapped
# GPU box does, on a stack like the box's, before a GPU window is spent on it:
#   1. a venv, build/box-check/venv, from the box's Python (3.12) and its stack from PyPI:
#      torch==2.11.*, jax==0.11.2, flax, optax, timm, matplotlib, numpy, scipy, pandas. PyPI's torch
#      wheel is its CUDA build: the first set-up downloads it with its nvidia-* libraries (about
#      3 GB; 5.5 GB installed), which load on a CPU. Made once; each check first removes what an
#      earlier one installed on top of the stack;
#   2. the tree as the box gets it, in build/box-check/tree: the commit of .offline/COMMIT (git
#      archive: no .git) with .offline/ (FashionMNIST added there when a post to check reads it and
#      .offline/ lacks it);
#   3. tools/device-run.sh of that tree with the venv's Python: its install from .offline/
#      (pip --no-index, with no index or local wheel folder configured), then each post at smoke
#      sizes (sidebyside.publish.merge.main_execute, smoke profile, on the CPU: the gpu profile
#      refuses without a GPU), one after the other, each on its own.
# It passes when every post executes. Prints a table (post, result, seconds) and writes it, with
# the stack, to build/box-check/result.txt. Exit 0: passed; 1: a post failed; 2: set-up missing.
# Usage: [SLUGS=slug,slug] [DEADLINE_S=3600] tools/box-check.sh   SLUGS default: every GPU post
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/build/box-check
venv=$dir/venv
tree=$dir/tree
# pandas too: the box has it (its real-models run of 2026-11-28 imported it; .offline/ had none)
stack=("torch==2.11.*" "jax==0.11.2" flax optax timm matplotlib numpy scipy pandas)
t0=$(date +%s)
py=${PYTHON:-python3}
command -v "$py" >/dev/null || py=python3  # lists the posts: any Python with PyYAML
fail() { echo "box-check: $*" >&2; exit 2; }

py312=$(command -v python3.12 || true)
{ [ -n "$py312" ] && "$py312" -c '' 2>/dev/null; } || py312=$(ls -d \
  "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V | tail -n 1)
[ -n "$py312" ] || fail "no Python 3.12 (the box's): install one (pyenv install 3.12, or" \
  "apt-get install python3.12 python3.12-venv) so that python3.12 is on PATH"
[ -f .offline/COMMIT ] && [ -f .offline/requirements-offline.txt ] ||
  fail "no .offline/: run make offline first (SLUGS=... as for the call); box-check installs it"
commit=$(cat .offline/COMMIT)
head=$(git rev-parse --short=12 HEAD)
[ "$commit" = "$head" ] || fail ".offline/ was made at $commit, not at HEAD ($head):" \
  "run make offline again"

mkdir -p "$dir"
want="${stack[*]} on $("$py312" -V 2>&1)"
if [ "$(cat "$venv/.box-stack" 2>/dev/null)" != "$want" ]; then
  echo "box-check: the box's stack into $venv from PyPI ($want): the first time, 3 GB to download"
  rm -rf "$venv"
  "$py312" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "${stack[@]}" ||
    fail "the box's stack did not install from PyPI (above)"
  "$venv/bin/python" -m pip freeze --all > "$venv/.box-freeze"
  echo "$want" > "$venv/.box-stack"
  echo "box-check: stack installed in $(( $(date +%s) - t0 )) s, $(du -sh "$venv" | cut -f1)"
fi
# what an earlier check installed from .offline/ goes, so that this one installs all it needs
extra=$("$venv/bin/python" -m pip freeze --all | sed 's/[=@ ].*//' |
  grep -vxiF -f <(sed 's/[=@ ].*//' "$venv/.box-freeze") || true)
# shellcheck disable=SC2086
[ -z "$extra" ] || "$venv/bin/python" -m pip uninstall -q -y $extra
set_up=$(( $(date +%s) - t0 ))

rm -rf "$tree" "$dir/device-run"
mkdir -p "$tree"
git archive "$commit" | tar -x -C "$tree"
cp -r .offline "$tree/.offline"
posts=$(PYTHONPATH=$tree/src "$py" -m sidebyside.publish.offline posts "${SLUGS:-}") ||
  fail "cannot list the posts of $commit (above)"
if grep -q ' fashion$' <<< "$posts" && [ ! -d "$tree/.offline/fashion-mnist" ]; then
  mkdir -p "$tree/.offline/fashion-mnist"
  cp "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"/*-ubyte.gz \
    "$tree/.offline/fashion-mnist/" || fail "a post reads FashionMNIST: install Debian's" \
    "dataset-fashion-mnist or set FASHION_MNIST_DIR"
  echo "box-check: FashionMNIST added to the tree's .offline/ (make offline carries it only for" \
    "the posts that read it)"
fi
slugs=$(cut -d' ' -f1 <<< "$posts" | paste -sd,)
echo "box-check: ${slugs//,/ } at smoke sizes through tools/device-run.sh (log:" \
  "build/box-check/device-run.log)"
rc=0
(
  cd "$tree"
  # as on the box: no git above the tree; no index, local wheel folder or constraint for pip
  export GIT_CEILING_DIRECTORIES=$dir PIP_CONFIG_FILE=/dev/null SIDEBYSIDE_GIT_SHA=$commit
  unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_CONSTRAINT
  export PYTHON=$venv/bin/python OUT=$dir/device-run DEADLINE_S=${DEADLINE_S:-3600}
  if grep -q BOX_CHECK_PROFILE tools/device-run.sh; then
    export BOX_CHECK_PROFILE=smoke
  else
    # a device-run.sh without BOX_CHECK_PROFILE: its install, then its executor as the stub
    "$PYTHON" -m pip install -q --no-index --find-links .offline/wheels \
      -r .offline/requirements-offline.txt || exit 3
    export FASHION_MNIST_DIR=$PWD/.offline/fashion-mnist
    export STUB_EXECUTOR="$PYTHON -c 'import sys; from sidebyside.publish import merge
sys.exit(merge.main_execute(sys.argv[1], profile=\"smoke\"))'"
  fi
  bash tools/device-run.sh "$slugs"
) > "$dir/device-run.log" 2>&1 || rc=$?

versions=$("$venv/bin/python" -c "import importlib.metadata as m
print(', '.join(f'{n} {m.version(n)}' for n in ('torch', 'jax', 'flax', 'optax', 'timm')))")
{
  printf '%-32s %-20s %8s\n' post result seconds
  ok=0
  for slug in ${slugs//,/ }; do
    line=$(grep "^$slug: " "$dir/device-run/timings.log" 2>/dev/null | tail -n 1 || true)
    code=$(sed -n 's/^[^:]*: exit \([0-9]*\) after.*/\1/p' <<< "$line")
    secs=$(sed -n 's/.* after \([0-9]*\) s,.*/\1/p' <<< "$line")
    case "$code" in
      0) result=executed; ok=$((ok + 1)) ;;
      "") result="not run" ;;
      *) result="failed (exit $code)" ;;
    esac
    printf '%-32s %-20s %8s\n' "$slug" "$result" "${secs:--}"
  done
  n=$(wc -w <<< "${slugs//,/ }")
  verdict=$([ "$ok" = "$n" ] && [ "$rc" = 0 ] && echo PASS || echo FAIL)
  echo "box-check $(date -u +%Y-%m-%d): $verdict, $ok of $n posts executed at smoke sizes on" \
    "the CPU, commit $commit"
  echo "  $("$venv/bin/python" -V), $versions; device-run.sh exit $rc;" \
    "$(( $(date +%s) - t0 )) s in all, $set_up s of it set-up"
} | tee "$dir/result.txt"
grep -q ': PASS,' "$dir/result.txt" || { tail -n 30 "$dir/device-run.log" >&2; exit 1; }
