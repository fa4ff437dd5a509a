#!/usr/bin/env bash
# The gpu profile on an air-gapped GPU box, in one command: install what the box lacks from
# .offline/ (made by `make offline` on a connected machine, from the committed tree), check
# that PyTorch and JAX both compute on the GPU, optionally run GPU tests, execute the gpu
# profile of the named posts, and pack what was published into one archive.
#
# Usage, from the repository root on the box (.offline/ copied or carried along):
#   tools/device-run.sh [SLUGS]            SLUGS: comma-separated (default: every post a GPU changes)
#   TESTS="tests/test_ladder.py" tools/device-run.sh ...   also run these tests first (at most TESTS_S seconds, 150)
#   DEADLINE_S=560 tools/device-run.sh ...   stop starting posts when the time left is short (default 560 s, for a
#                                            10-minute device call): a post still running then is stopped, unpublished
# Each post runs on its own, in the order given: one that fails or is stopped does not stop the next. The seconds
# each took are in timings.log.
# Writes into $OUT (or build/device-run): gpu-run.tgz (_posts, images, _data, build/executed,
# checkpoints) and the logs. Unpack the archive at the root of the same commit and commit
# what it published as it is. A run in parts (the gpu profiles of grid-sample-parity and
# swin-transformer-v2 stop when their time budget is spent, keeping what they measured in
# checkpoints/) goes on where it stopped once checkpoints/ is committed (the next call takes the
# committed tree), also at a later commit that changed none of the notebook's inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
slugs=${1:-fashion-mnist-pytorch-vs-flax,jit-and-autograd-timing,xla-and-scipy,grid-sample-parity,swin-transformer-v2}
out=${OUT:-build/device-run}
mkdir -p "$out"
if [ ! -f .offline/COMMIT ]; then
  echo "no .offline/: run 'make offline' on a connected machine from the committed tree, and bring .offline/ here" >&2
  exit 2
fi
python3 -m pip install -q --no-index --find-links .offline/wheels -r .offline/requirements-offline.txt
export FASHION_MNIST_DIR=$PWD/.offline/fashion-mnist SIDEBYSIDE_GIT_SHA=$(cat .offline/COMMIT) PYTHONUNBUFFERED=1
# Both frameworks on the same GPU, or stop here (the publisher asks again, per notebook).
PYTHONPATH=src python3 -c "from sidebyside.run import provenance as p; print('both frameworks on', p.check_gpu_profile(p.devices()))" \
  > "$out/check.log" 2>&1 || { cat "$out/check.log" >&2; exit 3; }
cat "$out/check.log"
start=$SECONDS
deadline=${DEADLINE_S:-560}
if [ -n "${TESTS:-}" ]; then
  # shellcheck disable=SC2086
  timeout "${TESTS_S:-150}" env PYTHONPATH=src python3 -m pytest -q -p no:cacheprovider $TESTS 2>&1 \
    | tee "$out/tests.log" || true
fi
status=0
: > "$out/timings.log"
for slug in ${slugs//,/ }; do
  left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt 30 ]; then
    echo "$slug: not started ($left s left of DEADLINE_S=$deadline)" | tee -a "$out/timings.log"
    status=4
    continue
  fi
  t0=$SECONDS
  rc=0
  if command -v make >/dev/null; then
    timeout "$left" make execute PROFILE=gpu FORCE=1 PYTHON=python3 SETUP=0 ONLY="$slug" 2>&1 \
      | tee -a "$out/execute.log" || rc=$?
  else  # what `make execute` runs, for a box without make
    timeout "$left" env PYTHONPATH="$PWD/src" python3 -m sidebyside.publish execute --profile gpu --only "$slug" \
      --site . --force 2>&1 | tee -a "$out/execute.log" || rc=$?
  fi
  echo "$slug: exit $rc after $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo ' (stopped at the deadline)')" \
    | tee -a "$out/timings.log"
  if [ "$rc" != 0 ]; then
    status=$rc
    # a stopped run's notebook kernel lives in a session of its own: end it before the next post is timed
    pkill -f ipykernel_launcher || true
    sleep 2
  fi
done
# checkpoints: the parts a run in parts has measured (grid-sample-parity and swin-transformer-v2), to commit for
# the next call and session.
tar czf "$out/gpu-run.tgz" _posts images _data $(ls -d build/executed checkpoints 2>/dev/null)
cat "$out/timings.log"
echo "packed $(du -h "$out/gpu-run.tgz" | cut -f1) into $out/gpu-run.tgz (commit $SIDEBYSIDE_GIT_SHA); exit $status"
exit "$status"
