#!/usr/bin/env bash
# One device call of the gpu profile on an air-gapped GPU box. The box only executes: install what the box lacks
# from .offline/ (made by `make offline` on a connected machine, from the committed tree: the execution wheels), check
# that PyTorch and JAX both compute on the GPU, optionally run GPU tests, execute the gpu profile of this call's posts
# (`sidebyside.publish.merge.execute`: each notebook executed into build/executed/ with its run record; nothing is
# rendered or published here, and nothing of the renderer is imported: no nbconvert, nh3, markdown-it or tinycss2),
# and pack the executed notebooks, their records and the checkpoints into one archive that records the commit and the
# stack. The machine that publishes renders and publishes them: `python -m sidebyside.publish merge`.
#
# Usage, from the repository root on the box (.offline/ copied or carried along):
#   CALL=1 tools/device-run.sh        call 1 of the fixed plan (PLAN=gpu-runs/plan-<date>.json, default the newest
#                                     committed one: `python -m sidebyside.publish plan --all --write` on the
#                                     development machine). The box never plans: it runs the plan's posts and parts
#                                     (sidebyside.publish.fixedplan), refuses a plan made from another tree, and a run
#                                     starts none of the parts the plan gives a later call. CALL=2 for the next, after
#                                     merging call 1's output into the tree
#   tools/device-run.sh SLUGS         these posts instead (comma-separated, in order; a slug named twice runs twice:
#                                     a run in parts goes on from the parts the first run saved)
#   TESTS="tests/test_ladder.py" ...  also run these tests first (at most TESTS_S seconds, 150)
#   DEADLINE_S=480 ...                the call's deadline, in seconds from its start (default: call_limit_s of
#                                     params/gpu-calls.yaml, which the planner plans for): no post starts with less
#                                     than 30 s left, a post still running then is stopped, unexecuted
#   SIDEBYSIDE_CALL_START=<epoch s>   the call's start (default: now). One clock: the deadline and every run's
#                                     run_budget_s count from it (sidebyside.run.checkpoints), so pass the time the
#                                     lent machine's command began where set-up came before this script
#   OFFLINE=0 PYTHON=.venv/bin/python ...   a connected machine set up by `make setup` (a CI runner): no .offline/,
#                                     this Python, the commit from git
#   BOX_CHECK_PROFILE=smoke ...       make box-check's rehearsal on a CPU: no GPU check, the posts at this profile
#   STUB_EXECUTOR="cmd" ...           a dry run: no install, no GPU check; `cmd SLUG` stands for the executor (it
#                                     writes build/executed/SLUG.ipynb and its run record) and the archive says it is
#                                     a stub's (testable on a CPU)
# Each post runs on its own: one that fails or is stopped does not stop the next; timings.log says how long each
# took and when it ended, in seconds from the call's start. Writes into $OUT (or build/device-run):
# gpu-run-<call or post>.tgz (build/executed, checkpoints, and gpu-run.json: commit, stack, device, the posts planned
# and those executed), packed again after every post, so a call stopped anywhere returns every post it finished;
# parts/<slug>.json, the checkpoint file copied as each part finishes (sidebyside.run.checkpoints.COPY_ENV), so it
# returns every part too; and the logs. Merge the archives of every call with
# `python -m sidebyside.publish merge $OUT/gpu-run-*.tgz` at the same commit (it refuses mixed commits or stacks),
# and commit what it published. A post in parts that the plan splits over two calls goes on in the next call from
# the checkpoints/ of the previous one: merge each archive before the next call.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SIDEBYSIDE_CALL_START:=$(date +%s)}"
export SIDEBYSIDE_CALL_START PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
elapsed() { echo $(( $(date +%s) - ${SIDEBYSIDE_CALL_START%.*} )); }
out=${OUT:-build/device-run}
mkdir -p "$out"
started=$(date -u -d "@${SIDEBYSIDE_CALL_START%.*}" +%Y-%m-%dT%H:%M:%S+00:00)
limit=$(sed -n 's/^call_limit_s: *\([0-9][0-9]*\).*/\1/p' params/gpu-calls.yaml 2>/dev/null || true)
deadline=${DEADLINE_S:-${limit:-480}}
export SIDEBYSIDE_CALL_DEADLINE_S=$deadline
# One compilation cache for the whole call, both frameworks alike (JAX's persistent cache, Inductor's and Triton's):
# every run and part of the call compiles once; each record says whether its first process found the cache cold.
export SIDEBYSIDE_COMPILE_CACHE=${SIDEBYSIDE_COMPILE_CACHE:-$PWD/build/compile-cache}
mkdir -p "$SIDEBYSIDE_COMPILE_CACHE"
py=${PYTHON:-python3}
profile=${BOX_CHECK_PROFILE:-gpu}  # make box-check: smoke, on a machine without a GPU
stub=${STUB_EXECUTOR:-}
if [ -n "$stub" ]; then
  : "${SIDEBYSIDE_GIT_SHA:=$(git rev-parse HEAD 2>/dev/null || true)}"
  [ -n "$SIDEBYSIDE_GIT_SHA" ] || { echo "a dry run outside a git checkout needs SIDEBYSIDE_GIT_SHA" >&2; exit 2; }
  echo '{"torch_device": "stub", "jax_device": "stub"}' > "$out/devices.json"
else
  if [ "${OFFLINE:-1}" = 0 ]; then
    : "${SIDEBYSIDE_GIT_SHA:=$(git rev-parse HEAD)}"
  elif [ ! -f .offline/COMMIT ]; then
    echo "no .offline/: run 'make offline' on a connected machine from the committed tree, and bring .offline/ here" >&2
    exit 2
  else
    "$py" -m pip install -q --no-index --find-links .offline/wheels -r .offline/requirements-offline.txt
    SIDEBYSIDE_GIT_SHA=$(cat .offline/COMMIT)
    export FASHION_MNIST_DIR=$PWD/.offline/fashion-mnist
  fi
  # Both frameworks on the same GPU, or stop here (each run's record is judged again).
  "$py" -c "import json, sys; from sidebyside.run import provenance as p; d = p.devices()
print('both frameworks on', p.check_gpu_profile(d) if sys.argv[2] == 'gpu' else 'no GPU check: ' + sys.argv[2])
json.dump(d, open(sys.argv[1], 'w'))" "$out/devices.json" "$profile" \
    > "$out/check.log" 2>&1 || { cat "$out/check.log" >&2; exit 3; }
  cat "$out/check.log"
fi
export SIDEBYSIDE_GIT_SHA
if [ $# -gt 0 ]; then
  slugs=$1
  label=$( [ "${slugs//,/}" = "$slugs" ] && echo "$slugs" || echo "posts-${slugs%%,*}-and-more")
else
  call=${CALL:-1}
  # the fixed plan's runs of this call, one a line: "<slug> <the parts a later call holds, as JSON>"
  runs=$("$py" -m sidebyside.publish.fixedplan "$call" ${PLAN:+"$PLAN"}) || {
    echo "the fixed plan cannot be run from this tree (above): nothing was run" >&2; exit 5; }
  label=call$call
  if [ -z "$runs" ]; then
    echo "call $call: the plan holds no such call; no archive"
    exit 0
  fi
  slugs=$(echo "$runs" | cut -d' ' -f1 | paste -sd,)
fi
: "${runs:=$(echo "${slugs//,/ }" | tr ' ' '\n' | sed 's/$/ []/')}"
export SIDEBYSIDE_PARTS_OUT="$PWD/$out/parts"
case "$out" in /*) SIDEBYSIDE_PARTS_OUT="$out/parts" ;; esac
mkdir -p "$SIDEBYSIDE_PARTS_OUT"
echo "${label}: ${slugs//,/ } (commit $SIDEBYSIDE_GIT_SHA; $(elapsed) s of DEADLINE_S=$deadline spent on set-up)"
if [ -n "${TESTS:-}" ]; then
  # shellcheck disable=SC2086
  timeout "${TESTS_S:-150}" "$py" -m pytest -q -p no:cacheprovider $TESTS 2>&1 | tee "$out/tests.log" || true
fi
pack() {
  # the archive of what the call finished so far: build/executed, checkpoints, and the manifest
  "$py" -c "import json, sys; from sidebyside.publish import merge
m = merge.write_manifest(sys.argv[1], site='.', commit=sys.argv[2], planned=sys.argv[3].split(','), started=sys.argv[4],
                         devices=json.load(open(sys.argv[5])), stub=bool(sys.argv[6]), call=sys.argv[7])
print('executed:', ', '.join(m['executed']) or 'nothing')" \
    "$out/gpu-run.json" "$SIDEBYSIDE_GIT_SHA" "$slugs" "$started" "$out/devices.json" "$stub" "$label"
  # shellcheck disable=SC2046
  tar czf "$archive.part" $(ls -d build/executed checkpoints 2>/dev/null) -C "$out" gpu-run.json
  mv "$archive.part" "$archive"
}
archive="$out/gpu-run-$label.tgz"
status=0
: > "$out/timings.log"
while read -r slug later <&3; do
  left=$((deadline - $(elapsed)))
  if [ "$left" -lt 30 ]; then
    echo "$slug: not started ($left s left of DEADLINE_S=$deadline)" | tee -a "$out/timings.log"
    status=4
    continue
  fi
  t0=$(elapsed)
  rc=0
  export SIDEBYSIDE_PARTS_LATER="$later"
  if [ -n "$stub" ]; then
    timeout "$left" bash -c "$stub \"\$1\"" stub "$slug" 2>&1 | tee -a "$out/execute.log" || rc=$?
  else
    timeout "$left" "$py" -c "import sys; from sidebyside.publish import merge
sys.exit(merge.main_execute(sys.argv[1], profile=sys.argv[2]))" "$slug" "$profile" 2>&1 | tee -a "$out/execute.log" \
      || rc=$?
  fi
  echo "$slug: exit $rc after $(( $(elapsed) - t0 )) s, at $(elapsed) s of the call$([ "$rc" = 124 ] && echo ' (stopped at the deadline)')" \
    | tee -a "$out/timings.log"
  if [ "$rc" != 0 ]; then
    status=$rc
    if [ -z "$stub" ]; then
      # a stopped run's notebook kernel lives in a session of its own: end it before the next post is timed
      pkill -f ipykernel_launcher || true
      sleep 2
    fi
  fi
  pack > /dev/null  # what the call finished so far comes back even if the call is stopped later
done 3<<< "$runs"
pack
cat "$out/timings.log"
echo "packed $(du -h "$archive" | cut -f1) into $archive (commit $SIDEBYSIDE_GIT_SHA); exit $status"
exit "$status"
