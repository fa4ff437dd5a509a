"""The planner of GPU calls (sidebyside.publish.schedule): measured costs in,
calls out, none over the limit, none empty, no part ending past its call's deadline
(counted from the call's start); unknown costs estimated and said so; resuming from
checkpoints; refusals that say what to cut; the GPU budgets the notebooks declare,
refused while over their limits."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import re

import pytest
import yaml
from conftest import committed_tree

from sidebyside.publish import pipeline, schedule
from sidebyside.publish.common import ROOT
from sidebyside.publish.discovery import discover
from sidebyside.publish.params import load_params


def _budgets(posts, call_overhead_s=0, run_overhead_s=0):
    return {"call_overhead_s": call_overhead_s, "run_overhead_s": run_overhead_s, "posts": posts}


#: The limits of the planner before one clock and two-call windows: what the packing tests were written for.
WIDE = {"limit_s": 540.0, "window_s": 1500.0, "max_calls": 3}


def _ends_in_time(plan):
    """Every run, in the order its call runs it, ends by its own deadline and the call's, from the call's start."""
    for call in plan.calls:
        end = call.overhead_s
        for run in call.runs:
            end += run.seconds
            assert end <= min(run.deadline_s or plan.limit_s, plan.limit_s) + 1e-9, (run, end)


def _check_plan(plan, runs_expected, *, limit_s, window_s, max_calls):
    """Every run in exactly one call; no call empty or over the limit; the window and the call count kept."""
    assert 1 <= len(plan.calls) <= max_calls
    assert all(call.runs for call in plan.calls)
    assert all(call.seconds <= limit_s + 1e-9 for call in plan.calls)
    _ends_in_time(plan)
    assert plan.seconds <= window_s + 1e-9
    got = sorted((r.slug, r.parts, r.seconds) for call in plan.calls for r in call.runs)
    assert got == sorted((r.slug, r.parts, r.seconds) for r in runs_expected)
    for slug in {r.slug for r in runs_expected}:  # a post's runs in call order are its runs in order
        assert [r for call in plan.calls for r in call.runs if r.slug == slug] == [
            r for r in runs_expected if r.slug == slug]


def _fits_somehow(costs, *, room, window_s, max_calls, overhead):
    """Brute force: is there any assignment of these run costs to at most max_calls calls that fits?"""
    for n in range(1, max_calls + 1):
        if n * overhead + sum(costs) > window_s:
            continue
        for assignment in itertools.product(range(n), repeat=len(costs)):
            loads = [0.0] * n
            for cost, call in zip(costs, assignment):
                loads[call] += cost
            if all(load <= room for load in loads):
                return True
    return False


def test_whole_posts_are_packed_into_calls_within_the_limit():
    assert (schedule.LIMIT_S, schedule.WINDOW_S, schedule.MAX_CALLS) == (480, 800, 2)
    posts = {"a": {"budget_s": 250}, "b": {"budget_s": 200}, "c": {"budget_s": 150}, "d": {"budget_s": 100}}
    plan = schedule.plan_calls(_budgets(posts, call_overhead_s=30), {}, list(posts))
    runs = [schedule.Run(s, float(e["budget_s"])) for s, e in posts.items()]
    _check_plan(plan, runs, limit_s=schedule.LIMIT_S, window_s=schedule.WINDOW_S, max_calls=schedule.MAX_CALLS)
    assert len(plan.calls) == 2  # 700 s of posts need two calls of 450 s of room, and two are enough
    assert sorted(s for call in plan.calls for s in call.slugs) == sorted(posts)


@pytest.mark.parametrize("seed", range(40))
def test_random_costs_plan_exactly_when_some_packing_fits(seed):
    rng = random.Random(seed)
    posts = {f"p{i}": {"budget_s": rng.randint(20, 420)} for i in range(rng.randint(1, 6))}
    limit, window, calls, overhead = 540.0, float(rng.choice([900, 1200, 1500])), 3, 30.0
    costs = [float(e["budget_s"]) for e in posts.values()]
    fits = _fits_somehow(costs, room=limit - overhead, window_s=window, max_calls=calls, overhead=overhead)
    try:
        plan = schedule.plan_calls(_budgets(posts, call_overhead_s=overhead), {}, list(posts), limit_s=limit,
                                   window_s=window, max_calls=calls)
    except schedule.PlanRefused as refused:
        assert not fits, f"refused although a packing exists: {refused}"
        assert "cannot fit" in str(refused)
        return
    assert fits
    _check_plan(plan, [schedule.Run(s, float(e["budget_s"])) for s, e in posts.items()], limit_s=limit,
                window_s=window, max_calls=calls)


def test_a_run_in_parts_is_cut_at_its_run_budget_and_resumes_from_the_checkpoint(tmp_path):
    entry = {"parts": {"parity": 100, "affine": 40, "bench/*": {"each_s": 60, "count": 6}}}
    params = {"checkpoint_file": "checkpoints/x.json", "run_budget_s": 200}
    runs, done = schedule.runs_of("x", entry, params, root=tmp_path, run_overhead_s=10)
    assert done == []
    # in order, each run's parts ending by run_budget_s from its call's start: at most 200 - 10 s of parts a run
    assert [r.parts for r in runs] == [("parity", "affine"), ("bench/#1", "bench/#2", "bench/#3"),
                                       ("bench/#4", "bench/#5", "bench/#6")]
    assert [r.seconds for r in runs] == [150, 190, 190]
    assert [r.last for r in runs] == [False, False, True]
    assert {r.deadline_s for r in runs} == {200}
    # a call's set-up comes first: 30 s of it leaves 160 s of parts a run
    runs, _ = schedule.runs_of("x", entry, params, root=tmp_path, run_overhead_s=10, call_overhead_s=30)
    assert max(r.seconds for r in runs) <= 170 and len(runs) == 4

    (tmp_path / "checkpoints").mkdir()
    saved = {"parity": {"key": "k", "seconds": 97.0, "value": 1}, "bench/bilinear/3d": {"key": "k", "seconds": 61.0}}
    (tmp_path / "checkpoints" / "x.json").write_text(json.dumps(saved))
    runs, done = schedule.runs_of("x", entry, params, root=tmp_path, run_overhead_s=10)
    assert sorted(done) == ["bench/bilinear/3d", "parity"]
    planned = [p for r in runs for p in r.parts]
    assert "parity" not in planned and planned.count("affine") == 1
    assert sum(p.startswith("bench/") for p in planned) == 5  # one of the six is saved already


def test_a_saved_part_is_planned_again_once_what_a_run_reads_changed_since_its_commit(tmp_path):
    files = {"notebooks/01_x.py": "# %%\nx = 1\n\n# %% [markdown]\n# Prose.\n", "src/sidebyside/lab/m.py": "a = 1\n",
             "src/sidebyside/publish/p.py": "b = 1\n", "params/x.yaml": "gpu: {}\n", "params/y.yaml": "gpu: {}\n",
             "README.md": "x\n"}
    measured_at = committed_tree(tmp_path, files)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "x.json").write_text(json.dumps(
        {"parity": {"key": "k", "seconds": 30.0, "commit": measured_at}}))
    entry, params = {"parts": {"parity": 40, "bench": 50}}, {"checkpoint_file": "checkpoints/x.json"}
    notebook = tmp_path / "notebooks" / "01_x.py"

    def done():
        return schedule.runs_of("x", entry, params, root=tmp_path, notebook=notebook)[1]

    assert done() == ["parity"]
    for name in ("README.md", "src/sidebyside/publish/p.py", "checkpoints/x.json", "params/y.yaml"):  # nothing x reads
        (tmp_path / name).write_text((tmp_path / name).read_text() + " ")
    assert done() == ["parity"]
    (notebook).write_text(notebook.read_text().replace("# Prose.", "# Prose, reworded.\n#\n# More."))
    assert done() == ["parity"]  # the notebook's prose is not what a part measured: its key keeps it
    for name in ("notebooks/01_x.py", "src/sidebyside/lab/m.py", "params/x.yaml"):
        before = (tmp_path / name).read_text()
        (tmp_path / name).write_text(before.replace("x = 1", "x = 2") if name.endswith("01_x.py") else
                                     before.replace("gpu: {}", "gpu: {n: 2}") if name.endswith(".yaml") else
                                     before + "# changed\n")
        assert done() == [], name  # measured again, so planned again
        (tmp_path / name).write_text(before)
    assert done() == ["parity"]
    (tmp_path / "params" / "x.yaml").write_text("gpu: {}\ngpu_budget: {budget_s: 9, measured: measured since}\n")
    assert done() == ["parity"]  # the budget beside the settings is not what a run reads
    # where git cannot tell (a commit it lacks, or no notebook given), a saved part counts as done
    (tmp_path / "checkpoints" / "x.json").write_text(json.dumps({"parity": {"key": "k", "seconds": 30.0,
                                                                             "commit": "0123456789ab"}}))
    assert done() == ["parity"]


def test_a_post_whose_parts_are_all_saved_still_takes_one_run_to_publish(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"parity": {"seconds": 5.0}}))
    runs, done = schedule.runs_of("x", {"parts": {"parity": 100}}, {"checkpoint_file": "c.json", "run_budget_s": 50},
                                  root=tmp_path, run_overhead_s=20)
    assert done == ["parity"] and len(runs) == 1 and runs[0].last and runs[0].seconds == 20


def test_a_post_in_parts_spreads_over_calls_with_its_completing_run_last(tmp_path):
    posts = {"big": {"parts": {"part/*": {"each_s": 100, "count": 9}}}, "small": {"budget_s": 120}}
    params = {"big": {"checkpoint_file": "ck.json", "run_budget_s": 400}}
    plan = schedule.plan_calls(_budgets(posts, call_overhead_s=20, run_overhead_s=10), params, list(posts),
                               root=tmp_path, **WIDE)
    big_calls = [n for n, call in enumerate(plan.calls) for r in call.runs if r.slug == "big"]
    lasts = [n for n, call in enumerate(plan.calls) for r in call.runs if r.slug == "big" and r.last]
    assert lasts == [max(big_calls)]
    runs, _ = schedule.runs_of("big", posts["big"], params["big"], root=tmp_path, run_overhead_s=10,
                               call_overhead_s=20, limit_s=WIDE["limit_s"])
    _check_plan(plan, runs + [schedule.Run("small", 120.0)], **WIDE)


def test_refusals_say_what_to_cut():
    posts = {"a": {"budget_s": 500}, "b": {"budget_s": 480}, "c": {"budget_s": 470}, "d": {"budget_s": 300}}
    with pytest.raises(schedule.PlanRefused) as refused:
        schedule.plan_calls(_budgets(posts, call_overhead_s=30), {}, list(posts), **WIDE)
    message = str(refused.value)
    assert "cannot fit" in message and "1750" in message  # the seconds needed
    cut = re.search(r"cut (.*) from this window", message).group(1)
    assert "a (500 s)" in cut  # the largest goes first; the rest then fits in three calls
    assert "the rest (" in message

    with pytest.raises(schedule.PlanRefused, match=r"a: one run takes 600 s, more than a call's 450 s after its set-up"):
        schedule.plan_calls(_budgets({"a": {"budget_s": 600}}, call_overhead_s=30), {}, ["a"])
    with pytest.raises(schedule.PlanRefused, match=r"x \(300 s\) cannot finish before its call's deadline.*at most 100 s"):
        schedule.plan_calls(_budgets({"p": {"parts": {"x": 300}}}), {"p": {"run_budget_s": 100}}, ["p"])
    with pytest.raises(schedule.PlanRefused, match=r"x \(500 s\) cannot finish.*at most the call's 480 s"):
        schedule.plan_calls(_budgets({"p": {"parts": {"x": 500}}}), {"p": {"run_budget_s": 900}}, ["p"])
    with pytest.raises(schedule.PlanRefused, match=r"no gpu budget for q in params/<slug>.yaml"):
        schedule.plan_calls(_budgets({}), {}, ["q"])


def test_an_unknown_cost_is_estimated_and_the_plan_says_how():
    """No part is taken as 0 s: a post not measured is planned at the most a post may take; a part with no cost
    at the largest measured or declared sibling, else its header's budget less what it declares, else a run of
    its own; the plan marks each estimate."""
    plan = schedule.plan_calls({**_budgets({"n": {"budget_s": None}}, call_overhead_s=30), "post_limit_s": 400},
                               {}, ["n"])
    assert plan.calls[0].runs[0].seconds == 370 and "ESTIMATE: budget_s at 370 s" in pipeline.format_plan(plan)
    entry = {"budget_s": 600, "parts": {"parity/a": 20, "ladder/a/*": {"each_s": 50, "count": 2},
                                        "ladder/b/*": {"each_s": None, "count": 2}, "tail": None}}
    runs, _ = schedule.runs_of("p", entry, {"run_budget_s": 480}, root=ROOT / "build" / "no-checkpoints")
    assert [r.parts for r in runs] == [("parity/a", "ladder/a/#1", "ladder/a/#2", "ladder/b/#1", "ladder/b/#2"),
                                       ("tail",)]
    assert [r.seconds for r in runs] == [20 + 2 * 50 + 2 * 50, 600 - 20 - 2 * 50]
    assert runs[0].estimated == ("ladder/b/* at 50 s each, estimated from the largest part its budget declares under "
                                 "ladder/",)
    assert runs[1].estimated == ("tail at 480 s, estimated from its budget_s less the parts it declares, "
                                 "shared",)
    alone, _ = schedule.runs_of("p", {"parts": {"x": 10, "y/*": {"each_s": None, "count": 2}}},
                                {"run_budget_s": 100}, root=ROOT / "build" / "no-checkpoints")
    assert [r.parts for r in alone] == [("x",), ("y/#1",), ("y/#2",)]  # nothing alike known: a run of its own each
    assert "nothing alike is known" in alone[1].estimated[0]


def test_a_run_is_handed_its_headers_estimates_of_its_parts():
    entry = {"budget_s": 600, "parts": {"parity": 20, "ladder/a/*": {"each_s": 50, "count": 2},
                                        "ladder/b/*": {"each_s": None, "count": 2}}}
    assert schedule.part_estimates("p", entry, {}, {}) == {"parity": 20, "ladder/a/*": 50, "ladder/b/*": 50}
    assert schedule.part_estimates("p", {"budget_s": 100}, {}, {}) == {}
    real = schedule.read_budgets(ROOT / "notebooks", ROOT / "params")
    estimates = schedule.part_estimates("real-models", real["posts"]["real-models"], {}, real)
    assert estimates == real["posts"]["real-models"]["parts"]  # every part declared: each its header's figure


def test_a_part_measured_under_the_same_parent_estimates_its_unmeasured_sibling(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"ladder/a/train": {"seconds": 70.0}}))
    entry = {"parts": {"ladder/a/*": {"each_s": None, "count": 2}, "ladder/b/*": {"each_s": None, "count": 1}}}
    runs, done = schedule.runs_of("p", entry, {"checkpoint_file": "c.json"}, root=tmp_path)
    assert done == ["ladder/a/train"] and runs[0].parts == ("ladder/a/#2", "ladder/b/#1")
    assert runs[0].seconds == 140 and "the largest part measured under ladder/" in runs[0].estimated[-1]


def test_no_run_is_planned_to_end_past_its_deadline_from_the_calls_start():
    """A run in parts stops at its run_budget_s from the call's start: it goes first in its call, and a call
    whose runs could not all end in time is not made."""
    posts = {"whole": {"budget_s": 200}, "parts": {"parts": {"p/*": {"each_s": 100, "count": 2}}}}
    params = {"parts": {"checkpoint_file": "c.json", "run_budget_s": 300}}
    plan = schedule.plan_calls(_budgets(posts, call_overhead_s=30, run_overhead_s=20), params, ["whole", "parts"],
                               root=ROOT / "build" / "no-checkpoints")
    _ends_in_time(plan)
    assert plan.calls[0].slugs == ["parts", "whole"] and len(plan.calls) == 1  # ends at 250 s, then 450 s
    assert "ends by 250 s; parts p/#1, p/#2 (its parts end by 300 s of the call" in pipeline.format_plan(plan)
    posts["whole"]["budget_s"] = 260  # 30 + 220 + 260 > 480: two calls
    plan = schedule.plan_calls(_budgets(posts, call_overhead_s=30, run_overhead_s=20), params, ["whole", "parts"],
                               root=ROOT / "build" / "no-checkpoints")
    _ends_in_time(plan)
    assert len(plan.calls) == 2


@pytest.mark.parametrize("seed", range(25))
def test_random_posts_in_parts_never_end_past_a_deadline(seed):
    rng = random.Random(seed)
    posts, params = {}, {}
    for i in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            posts[f"w{i}"] = {"budget_s": rng.randint(20, 300)}
        else:
            posts[f"p{i}"] = {"parts": {"k/*": {"each_s": rng.randint(10, 150), "count": rng.randint(1, 4)}}}
            params[f"p{i}"] = {"checkpoint_file": "c.json", "run_budget_s": rng.choice([0, 250, 400, 480])}
    try:
        plan = schedule.plan_calls(_budgets(posts, call_overhead_s=30, run_overhead_s=20), params, list(posts),
                                   root=ROOT / "build" / "no-checkpoints")
    except schedule.PlanRefused as refused:
        assert "cannot fit" in str(refused)
        return
    _ends_in_time(plan)
    assert all(call.seconds <= schedule.LIMIT_S for call in plan.calls) and plan.seconds <= schedule.WINDOW_S


def test_nothing_stale_plans_no_call():
    plan = schedule.plan_calls(_budgets({"a": {"budget_s": 10}}), {}, [])
    assert plan.calls == [] and "nothing to run" in pipeline.format_plan(plan)


def test_the_gpu_budgets_live_in_the_settings_files_and_say_where_each_figure_comes_from():
    budgets = schedule.read_budgets(ROOT / "notebooks", ROOT / "params")
    posts = budgets["posts"]
    for path in (ROOT / "notebooks").glob("*.py"):  # one home: no header declares a budget any more
        assert not re.search(r"^#     gpu:", path.read_text(), re.M), path
    assert set(posts) == {"fashion-mnist-pytorch-vs-flax", "grid-sample-parity", "jit-and-autograd-timing",
                          "xla-and-scipy", "swin-transformer-v2", "real-models"}
    grid, swin = posts["grid-sample-parity"]["parts"], posts["swin-transformer-v2"]["parts"]
    gpu = load_params(ROOT / "params", "gpu", discover(ROOT / "notebooks"))
    # hardware_only: the accuracy over seeds and the trained model's parity are the cpu run's, not parts of a GPU run
    assert gpu["swin-transformer-v2"]["hardware_only"] and list(swin)[0] == "parity/timed"
    assert not any(name.startswith(("accuracy/", "parity/trained")) for name in swin)
    assert budgets["call_overhead_s"] == 30 and budgets["run_overhead_s"] == 30
    assert (budgets["call_limit_s"], budgets["window_s"], budgets["max_calls"], budgets["windows"]) == (480, 800, 2, 2)
    assert (budgets["post_limit_s"], budgets["total_limit_s"]) == (400, 1500)  # the whole GPU half in two windows
    # The parts the budget counts are the parts the gpu parameters make: a benchmark configuration per mode at each
    # size, a speed setting per phase, precision and batch.
    from sidebyside.grid_sample.bench import configs
    grid_params = gpu["grid-sample-parity"]
    made = [c["name"] for c in configs(tuple(grid_params["bench_modes"]), grid_params["bench_sizes"])]
    assert [k for k in grid if k.startswith("bench/")] == [f"bench/{mode}/*" for mode in grid_params["bench_modes"]]
    for mode in grid_params["bench_modes"]:
        assert grid[f"bench/{mode}/*"]["count"] == sum(name.startswith(f"{mode}/") for name in made), mode
    assert ("affine" in grid) == bool(grid_params["affine_modes"])
    swin_params = gpu["swin-transformer-v2"]
    assert [k for k in swin if k.startswith("speed/")] == [f"speed/{phase}/*" for phase in swin_params["speed_phases"]]
    # parallel-training plans no GPU section (one GPU shows nothing of parallelism): left out, its reason kept
    assert "parallel-training" not in posts and "simulated devices" in budgets["not_planned"]["parallel-training"]
    for slug, entry in posts.items():  # every figure says where it comes from: measured (a GPU and a commit) or how
        assert re.search(r"\b(H100|H200)\b.*\b[0-9a-f]{7}\b|ESTIMATE", entry["measured"]), slug
    slugs = {i.slug for i in discover(ROOT / "notebooks")}
    assert "weight-visualisation" in slugs and "weight-visualisation" not in posts  # gains nothing from a GPU


def test_a_header_that_still_declares_a_gpu_budget_is_refused_saying_where_it_goes(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook(notebooks / "01_a.py", "a", {"budget_s": 100, "measured": "ESTIMATE"})
    path = notebooks / "01_a.py"
    path.write_text(path.read_text().replace("#     metrics:", "#     gpu: {budget_s: 1, measured: x}\n#     metrics:"))
    with pytest.raises(schedule.PublishError, match=r"01_a.py: its header gives a gpu budget; .* params/a.yaml, "
                                                    r"under gpu_budget"):
        schedule.read_budgets(notebooks, ROOT / "params")


def test_plan_explain_prints_every_part_with_where_its_figure_comes_from(capsys):
    from sidebyside.publish.cli import main

    main(["plan", "--all", "--explain"])
    out = capsys.readouterr().out
    budgets = schedule.read_budgets(ROOT / "notebooks", ROOT / "params")
    for slug, entry in budgets["posts"].items():
        assert f"  {slug}: budget_s {entry['budget_s']}" in out
        for name in entry.get("parts") or {}:
            assert re.search(rf"^    {re.escape(name)}: [\d.]+ s", out, re.M), name
    assert "limits (params/gpu-calls.yaml): call_overhead_s 30" in out


def test_headers_over_their_budget_are_refused_naming_the_parts_to_cut():
    """400 s a post with its set-up (a post named in post_calls: that many calls of 400 s), 1,600 s for all: the
    planner refuses headers over these, planning nothing, and names what to cut and what then fits."""
    limits = {"post_limit_s": 400, "post_calls": {"big": 2}, "total_limit_s": 1600}
    posts = {"whole": {"budget_s": 390},
             "big": {"parts": {"parity": 100, "ladder/*": {"each_s": 300, "count": 3}}},
             "fine": {"budget_s": 200}}
    budgets = {**_budgets(posts, call_overhead_s=30, run_overhead_s=20), **limits}
    assert schedule.plan_calls(budgets, {}, ["fine"]).calls  # only the headers of the posts planned are judged
    with pytest.raises(schedule.PlanRefused) as refused:
        schedule.plan_calls(budgets, {}, ["fine", "whole", "big"])
    message = str(refused.value)
    assert "nothing is planned" in message and "fine:" not in message
    assert "whole: needs 420 s (budget_s 390 s and 30 s of set-up), over the 400 s a post may take" in message
    assert "until budget_s is at most 370 s" in message
    # big: [parity 100] and three ladders of 300 s, each a run of its own (at most 350 s of parts a run, 20 s
    # besides), in 3 calls' set-up: 1,000 + 4 x 20 + 3 x 30
    assert "big: needs 1,170 s (4 parts, 1,000 s" in message and "over its 2 call(s) of 400 s" in message
    assert "cut ladder/* (2 of 3, 600 s), or shrink them; the rest, 500 s, fits" in message
    assert "all GPU posts" not in message  # 1,820 s together, but 1,430 s once each is cut to its own limit
    with pytest.raises(schedule.PlanRefused, match=r"all GPU posts together need 1,820 s, over the 1,000 s they may "
                                                   r"take in all \(big 1,170 s, whole 420 s, fine 230 s\); cut to their "
                                                   r"own limits they would still need 1,430 s: cut 430 s more"):
        schedule.plan_calls({**budgets, "total_limit_s": 1000}, {}, ["fine", "whole", "big"])
    posts["whole"]["budget_s"] = 300
    posts["big"]["parts"]["ladder/*"]["count"] = 1
    plan = schedule.plan_calls(budgets, {}, ["whole", "big"])  # within their limits: planned
    assert sorted(r.slug for call in plan.calls for r in call.runs) == ["big", "whole"]
    with pytest.raises(schedule.PlanRefused, match=r"all GPU posts together need 1,060 s, over the 1,000 s they may "
                                                   r"take in all \(big 500 s, whole 330 s, fine 230 s\): cut 60 s more"):
        schedule.plan_calls({**budgets, "total_limit_s": 1000}, {}, ["fine", "whole", "big"])
    with pytest.raises(schedule.PlanRefused, match=r"these posts together need 730 s, over the 500 s"):
        schedule.plan_calls({**budgets, "total_limit_s": 500}, {}, ["fine", "big"])


def test_plan_all_either_fits_two_windows_or_names_what_to_cut(capsys):
    """`publish plan --all` on today's budgets: a plan of at most four calls, two a window, every run ending within
    its call, 1,500 s in all; or a refusal, planning nothing, that names the posts over their limits and what to
    cut. The post that plans no GPU section is named with its reason."""
    from sidebyside.publish.cli import main

    code = main(["plan", "--all"])
    out, err = capsys.readouterr()
    budgets = schedule.read_budgets(ROOT / "notebooks", ROOT / "params")
    params = load_params(ROOT / "params", "gpu", discover(ROOT / "notebooks"))
    over = schedule.over_budget(budgets, params)
    if over:
        assert code == 2 and "nothing is planned until they fit" in err and "call 1" not in out
        assert all(line.split(":")[0] in err for line in over if not line.startswith(("all GPU", "these")))
        return
    assert code == 0 and "call 1" in out, err
    calls = [int(n) for n in re.findall(r"^  call (\d+):", out, re.M)]
    assert len(calls) <= 4
    for line in out.splitlines():
        ends = re.search(r"ends by (\d+) s", line)
        assert not ends or int(ends.group(1)) <= budgets["call_limit_s"], line
    assert "parallel-training: no GPU section planned (its gpu_budget.not_planned): one GPU shows nothing" in out


def test_two_windows_put_the_most_valuable_posts_first_and_keep_each_window_within_its_seconds():
    posts = {s: {"budget_s": b, "rank": r} for s, b, r in
             [("a", 400, 1), ("b", 300, 2), ("c", 350, 3), ("d", 200, 4), ("e", 60, 5)]}
    budgets = {**_budgets(posts, call_overhead_s=30), "windows": 2, "total_limit_s": 1500, "window_s": 800,
               "max_calls": 2, "order": list(posts)}
    plan = schedule.plan_calls(budgets, {}, list(posts))
    assert len(plan.calls) <= 4 and plan.seconds <= 1500
    assert plan.calls[0].runs[0].slug == "a"  # the most valuable post runs in the first call
    for window in (plan.calls[:2], plan.calls[2:]):
        assert sum(c.seconds for c in window) <= 800
    assert sorted(r.slug for c in plan.calls for r in c.runs) == sorted(posts)


def test_a_written_plan_names_its_commit_and_tree_and_the_box_reads_its_calls(tmp_path):
    from sidebyside.publish import fixedplan

    posts = {"big": {"parts": {"p/a": 200, "p/b": 200, "p/c": 200}}, "small": {"budget_s": 100}}
    params = {"big": {"checkpoint_file": "checkpoints/big.json", "run_budget_s": 430}}
    plan = schedule.plan_calls({**_budgets(posts, call_overhead_s=30), "windows": 2, "max_calls": 2}, params,
                               ["big", "small"], root=tmp_path)
    for folder, text in (("src/sidebyside/lab", "x = 1\n"), ("notebooks", "# %%\n"), ("params", "a: 1\n")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "f.py").write_text(text)
    document = fixedplan.plan_document(plan, root=tmp_path, commit="abc1234", made=dt.date(2026, 12, 2),
                                       calls_per_window=2)
    path = fixedplan.write_plan(document, tmp_path)
    assert path == tmp_path / "gpu-runs" / "plan-2026-12-02.json"
    read = fixedplan.read_plan(path)
    assert read["commit"] == "abc1234" and read["tree"] == fixedplan.tree_digest(tmp_path)
    runs = [fixedplan.call_runs(read, n) for n in range(1, len(read["calls"]) + 1)]
    big = [later for call in runs for slug, later in call if slug == "big"]
    assert big[0] and big[-1] == []  # the first run of big is told what later calls hold; the last, nothing
    assert fixedplan.call_runs(read, 9) == []
    (tmp_path / "src/sidebyside/publish").mkdir()
    (tmp_path / "src/sidebyside/publish/p.py").write_text("y = 2\n")  # the publisher decides nothing measured
    (tmp_path / "gpu-runs" / "notes.txt").write_text("the plan's own folder\n")
    assert fixedplan.tree_digest(tmp_path) == read["tree"]
    (tmp_path / "src/sidebyside/lab/f.py").write_text("x = 2\n")
    assert fixedplan.tree_digest(tmp_path) != read["tree"]
    assert fixedplan.main_call(["1", str(path)], root=tmp_path) == 2


def _notebook(path, slug, gpu):
    """A notebook with the least a header needs, and ``gpu`` as the GPU budget of its settings file."""
    meta = {"slug": slug, "title": slug, "date": "2026-11-22", "description": "A post.", "compared": "Nothing.",
            "metrics": ["n"]}
    (path.parent.parent / "params").mkdir(exist_ok=True)
    (path.parent.parent / "params" / f"{slug}.yaml").write_text(yaml.safe_dump({"gpu_budget": gpu}))
    path.write_text("\n".join(["# ---", "# jupyter:", "#   kernelspec:", "#     display_name: Python 3",
                               "#     language: python", "#     name: python3", "#   sidebyside:",
                               *[f"#     {k}: {json.dumps(v)}" for k, v in meta.items()], "# ---", "",
                               '# %% tags=["parameters"]', "n = 3", ""]))


def test_a_header_that_plans_no_gpu_section_is_left_out_and_said(tmp_path):
    """gpu.not_planned (a sentence: why) keeps a post out of every plan and budget; the plan names it with its
    reason, planning it by name is refused with that reason, and a not_planned that gives no reason is refused."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook(notebooks / "01_a.py", "a", {"budget_s": 100, "measured": "ESTIMATE"})
    _notebook(notebooks / "02_b.py", "b", {"budget_s": 5000, "measured": "ESTIMATE", "rank": 1,
                                           "not_planned": "one GPU shows nothing here"})
    budgets = schedule.read_budgets(notebooks, ROOT / "params")
    assert list(budgets["posts"]) == ["a"] and budgets["order"] == []
    assert budgets["not_planned"] == {"b": "one GPU shows nothing here"}
    assert schedule.over_budget(budgets, {}) == []  # its 5,000 s count in no budget
    plan = schedule.plan_calls(budgets, {}, ["a"])
    assert plan.calls[0].slugs == ["a"]
    assert "  b: no GPU section planned (its gpu_budget.not_planned): one GPU shows nothing here" in (
        pipeline.format_plan(plan).splitlines())
    nothing = schedule.plan_calls(budgets, {}, [])
    assert pipeline.format_plan(nothing).splitlines()[1].startswith("  b: no GPU section planned")
    with pytest.raises(schedule.PlanRefused, match=r"no GPU section is planned for b \(one GPU shows nothing here\)"):
        schedule.plan_calls(budgets, {}, ["a", "b"])
    _notebook(notebooks / "02_b.py", "b", {"budget_s": 5000, "measured": "ESTIMATE", "not_planned": True})
    with pytest.raises(schedule.PublishError, match=r"02_b.py: its gpu_budget.not_planned must say"):
        schedule.read_budgets(notebooks, ROOT / "params")


def test_after_a_merged_call_the_next_plan_starts_where_the_run_stopped(tmp_path):
    """The parts a call measured are in checkpoints/ once its archive is merged: the next plan's first call
    measures the rest, and the call that had both runs now has one."""
    posts = {"big": {"parts": {"part/*": {"each_s": 100, "count": 5}}}}
    params = {"big": {"checkpoint_file": "checkpoints/big.json", "run_budget_s": 400}}
    budgets = _budgets(posts, call_overhead_s=20, run_overhead_s=10)
    first = schedule.plan_calls(budgets, params, ["big"], root=tmp_path)
    assert [len(r.parts) for call in first.calls for r in call.runs] == [3, 2]  # 20 + 10 + 3 x 100 <= 400
    measured = len(first.calls[0].runs[0].parts)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "big.json").write_text(json.dumps(
        {f"part/{i}": {"seconds": 98.0, "commit": "c"} for i in range(measured)}))
    second = schedule.plan_calls(budgets, params, ["big"], root=tmp_path)
    assert len(second.calls) == 1 and len(second.done["big"]) == measured
    assert [r.parts for r in second.calls[0].runs] == [first.calls[1].runs[0].parts]
    assert second.calls[0].runs[0].last


def test_an_ordered_post_is_planned_first_and_alone_a_window_at_a_time(tmp_path):
    """``order`` puts a post first; when everything does not fit, it is planned alone, its first runs that fit
    (none of them publishes until the last), the rest left to a later window."""
    posts = {"small": {"budget_s": 200}, "big": {"parts": {"part/*": {"each_s": 400, "count": 6}}}}
    params = {"big": {"checkpoint_file": "checkpoints/big.json", "run_budget_s": 450}}
    budgets = {**_budgets(posts, call_overhead_s=20, run_overhead_s=10), "order": ["big"]}
    plan = schedule.plan_calls(budgets, params, ["small", "big"], root=tmp_path, **WIDE)
    assert {r.slug for call in plan.calls for r in call.runs} == {"big"}
    runs = [r for call in plan.calls for r in call.runs]
    assert len(runs) == 3 and not any(r.last for r in runs)
    assert [r.parts for r in runs] == [("part/#1",), ("part/#2",), ("part/#3",)]
    whole = schedule.plan_calls({**budgets, "posts": {"small": {"budget_s": 200}, "big": {"budget_s": 300}}}, {},
                                ["small", "big"])
    assert whole.calls and {r.slug for call in whole.calls for r in call.runs} == {"small", "big"}


def test_when_the_posts_do_not_all_fit_the_window_holds_the_most_of_them_in_their_order():
    """Four ranked posts, three of which fill a window: those three, not the first one alone; then the rest."""
    posts = {"a": {"budget_s": 350}, "b": {"budget_s": 200}, "c": {"budget_s": 150}, "d": {"budget_s": 100}}
    budgets = {**_budgets(posts, call_overhead_s=30), "order": ["a", "b", "c", "d"]}
    plan = schedule.plan_calls(budgets, {}, list(posts), limit_s=480, window_s=800, max_calls=2)
    assert sorted(s for call in plan.calls for s in call.slugs) == ["a", "b", "c"]  # + d: 860 s, over 800
    _check_plan(plan, [schedule.Run(s, float(posts[s]["budget_s"])) for s in "abc"], limit_s=480, window_s=800,
                max_calls=2)
    later = schedule.plan_calls(budgets, {}, ["d"], limit_s=480, window_s=800, max_calls=2)
    assert [call.slugs for call in later.calls] == [["d"]]
    # unranked, the same posts are refused, naming what to cut
    with pytest.raises(schedule.PlanRefused, match="cannot fit"):
        schedule.plan_calls(_budgets(posts, call_overhead_s=30), {}, list(posts), limit_s=480, window_s=800,
                            max_calls=2)


def test_real_models_comes_first_in_the_gpu_order_and_its_budget_is_its_parts():
    budgets = schedule.read_budgets(ROOT / "notebooks", ROOT / "params")
    assert budgets["order"] == ["real-models", "swin-transformer-v2", "fashion-mnist-pytorch-vs-flax",
                                "jit-and-autograd-timing", "xla-and-scipy", "grid-sample-parity"]
    entry = budgets["posts"]["real-models"]
    assert "Measured on an H200" in entry["measured"]  # its parts were, in one call of 2026-11-28
    gpu = load_params(ROOT / "params", "gpu", discover(ROOT / "notebooks"))
    runs, _ = schedule.runs_of("real-models", entry, gpu["real-models"], root=ROOT / "build" / "no-checkpoints",
                               run_overhead_s=budgets["run_overhead_s"])
    assert entry["budget_s"] == sum(r.seconds for r in runs)
    # The parts are those the gpu parameters make, in the order the notebook runs them: each model's parity, then
    # each model's ladders (the workloads it is timed at, at the batches of the question, in each precision).
    params = gpu["real-models"]
    made = []
    for key in params["models"]:
        timed = params["workloads"].get(key, ["train", "generate" if key == "gpt2" else "infer"])
        for precision in params["precisions"]:
            if "train" in timed:
                made.append((key, "train", params["train_sequences"] if key == "gpt2" else params["train_batch"],
                             precision))
            if key == "gpt2" and "generate" in timed:
                made += [(key, "generate", b, precision) for b in params["generate_batches"]]
            elif key != "gpt2" and "infer" in timed:
                made += [(key, "infer", b, precision)
                         for b in dict.fromkeys([params["latency_batch"], params["throughput_batch"]])]
    assert list(entry["parts"]) == [f"parity/{key}" for key in params["models"]] + [
        f"ladder/{key}/{workload}/{batch}/{precision}" for key, workload, batch, precision in made]
