"""The publisher's pipeline verbs, each callable from Python and from the command line
(:mod:`sidebyside.publish.cli`): ``execute`` (:func:`run`), ``render`` (:func:`rerender`),
``list`` (:func:`list_notebooks`), ``plan`` (:func:`plan_gpu_calls`) and ``readme``
(:func:`write_readme`). Every verb that reads parameters reads them from ``params_dir``."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sidebyside.publish import schedule
from sidebyside.publish.cache import freshness, plan, published_record
from sidebyside.publish.common import ROOT, PublishError, say
from sidebyside.publish.discovery import discover, read_notebook_info, select
from sidebyside.publish.guard import Guard, TreeWatch, reaped
from sidebyside.publish.params import check_profile, detect_profile, load_all_params
from sidebyside.publish.records import check_record, split_runs
from sidebyside.publish.rendering import check_date, render, site_config
from sidebyside.publish.running import check_before_running, complete_record, execute, key_and_stamp
from sidebyside.publish.site import completed_run, forget_run, holding_lock, publish, recover, write_run_record

__all__ = ["run", "rerender", "list_notebooks", "plan_gpu_calls", "stale_gpu_posts", "format_plan", "README_BEGIN",
           "README_END", "posts_table", "write_readme"]

#: The lines between which the README holds the table of posts (:func:`write_readme`).
README_BEGIN = "<!-- posts: generated from the notebooks' headers by `make readme`; do not edit -->"
README_END = "<!-- /posts -->"


@holding_lock
def run(*, profile: str = "auto", only: str | None = None, force: bool = False, site: Path = ROOT,
        build: Path = ROOT / "build", notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params",
        root: Path = ROOT, progress: bool = True, dry_run: bool = False, aa: bool = False) -> int:
    """Execute (when needed) and publish notebooks. Returns a process exit code. ``aa``: an A/A
    run (every timed contestant races the first one's function), for a scratch site only. Each run
    is guarded (:class:`sidebyside.publish.guard.Guard`): a notebook that changed a published file
    fails with the files named, and they are put back."""
    started = time.perf_counter()
    if profile == "auto":
        profile = detect_profile()
        say(f"profile: {profile} (detected; PROFILE=smoke|cpu|gpu to choose)")
    check_profile(profile)
    everything = discover(notebooks)
    infos = select(everything, only)
    if not infos:
        raise PublishError(f"no notebooks found in {notebooks} (expected NN_topic.py files)")
    params_by_profile = load_all_params(params_dir, everything)
    for message in recover(site):
        say(f"recovered {message}")
    if not force:  # a forced run replaces every file of its posts: nothing to restore first
        from sidebyside.publish import state

        found = state.problems(site, [i.slug for i in infos], {i.slug: published_record(site, i.slug) for i in infos})
        if found:
            raise PublishError("the site is not whole; nothing was run:\n  " + "\n  ".join(found))
    decisions = plan(infos, profile, params_by_profile, site, force=force, root=root)
    config = site_config(site, root)
    from sidebyside.publish import footprint  # not at import: `python -m sidebyside.publish.footprint`

    if not dry_run and any(d.action == "run" for d in decisions):
        check_before_running(profile, root)
        for line in footprint.prune_caches(root):  # each cache folder within its cap, oldest out first
            say(line)
    for n, decision in enumerate(decisions, 1):
        info = decision.info
        label = f"[{n}/{len(decisions)}] {info.slug}"
        if decision.action != "run":
            say(f"{label}: {decision.action} ({decision.reason})")
            continue
        if dry_run:
            say(f"{label}: would run ({decision.reason})")
            continue
        check_date(info, config)
        say(f"{label}: running {info.relpath(root)} with the {profile} profile ({decision.reason}) ...")
        t0 = time.perf_counter()
        _, nb = read_notebook_info(info.path)
        params = params_by_profile[profile][info.slug]
        forget_run(build / "executed" / f"{info.slug}.ipynb")
        with Guard(site, info.slug) as guard:  # the run may write no published file, the publication only its own
            # nor any other file of the checkout or the site (its checkpoint file aside), and leaves no process
            watch = TreeWatch([root, site], allowed=[params["checkpoint_file"]] if params.get("checkpoint_file") else [])
            try:
                with reaped(), footprint.Watch() as sampled:  # its wall time, its processes' peak memory
                    executed, saved = execute(info, nb, profile, params, build, root=root, progress=progress, aa=aa,
                                              limit=_limit(site, info.slug, profile))
                footprint.note_run(saved, sampled)  # provenance.run_s, provenance.peak_rss_bytes
            except BaseException:
                watch.restore(info.slug)  # a failed run leaves the checkout and the site as they were
                raise
            finally:
                guard.check("its notebook's run")
            watch.check(info.slug, "its notebook's run")
            key, saved["provenance"]["git_sha"] = key_and_stamp(info, profile, params, params_dir, saved, root)
            record = complete_record(saved, info, profile, params, key, root)
            check_record(record, info.slug, info.metrics)  # before anything is kept of this run
            write_run_record(executed, record)
            import nbformat

            post, images = render(nbformat.read(executed, as_version=4), record, info, config, root=root)
            target = publish(site, info, post, images, record)
            guard.check("its publication", own=True)
        say(f"{label}: done in {time.perf_counter() - t0:.1f} s -> {target.relative_to(site)} "
             f"(+{len(images)} image{'s' if len(images) != 1 else ''})")
    if not dry_run:
        from sidebyside.publish import scoreboard

        scoreboard.write_freshness(site, infos, params_by_profile, root, everything)
    say(f"all {len(decisions)} notebook(s) handled in {time.perf_counter() - started:.1f} s")
    return 0


@holding_lock
def rerender(*, only: str | None = None, site: Path = ROOT, build: Path = ROOT / "build",
             notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT) -> int:
    """Render the published runs again from ``build/executed`` (after a
    template change), keeping each published results record: a post's cpu run
    from ``<slug>.ipynb``, its GPU run (its section) from ``<slug>.gpu.ipynb``.

    Only a completed run is rendered, and only the one that is published:
    the executed copy's run record (:func:`completed_run`) must
    match the published record (profile, commit, key, time). Anything else
    is refused before anything is written, with what to run instead."""
    import nbformat

    config = site_config(site, root)
    for message in recover(site):
        say(f"recovered {message}")
    jobs, refused = [], []
    for info in select(discover(notebooks), only):
        rerun = f"run `make execute ONLY={info.slug}` instead"
        try:
            record = published_record(site, info.slug)
        except PublishError as exc:
            refused.append(f"{info.slug}: {exc}")
            continue
        if record is None:
            refused.append(f"{info.slug}: nothing is published to render again; {rerun}")
            continue
        # each run the post holds, from its own executed copy (a GPU run's is <slug>.gpu.ipynb: publish merge)
        cpu_run, gpu_run = split_runs(record)
        for published, name in ((cpu_run, f"{info.slug}.ipynb"), (gpu_run, f"{info.slug}.gpu.ipynb")):
            if published is None:
                continue
            executed = build / "executed" / name
            ran, why = completed_run(executed)
            if ran is None:
                refused.append(f"{info.slug}: {why}; {rerun}")
                continue
            differ = [key for key, get in (("profile", lambda r: r.get("profile")),
                                           ("commit", lambda r: (r.get("provenance") or {}).get("git_sha")),
                                           ("key", lambda r: r.get("source_hash")),
                                           ("time", lambda r: r.get("executed_at"))) if get(ran) != get(published)]
            if differ:
                refused.append(
                    f"{info.slug}: {executed} holds the {ran.get('profile')} run of {ran.get('executed_at')}, but "
                    f"the published result is the {published['profile']} run of {published['executed_at']} (they "
                    f"differ in {', '.join(differ)}); render only renders the published run again: {rerun} "
                    f"(with FORCE=1 to replace a larger profile)")
                continue
            jobs.append((info, executed, published))
    if refused:
        raise PublishError("render refused; nothing was changed:\n  " + "\n  ".join(refused))
    for info, executed, record in jobs:
        check_date(info, config)
        post, images = render(nbformat.read(executed, as_version=4), record, info, config, root=root)
        say(f"{info.slug}: rendered -> {publish(site, info, post, images, record).relative_to(site)}")
    from sidebyside.publish import scoreboard

    everything = discover(notebooks)
    scoreboard.write_freshness(site, select(everything, only), load_all_params(params_dir, everything), root,
                               everything)
    return 0


def list_notebooks(*, only: str | None = None, site: Path = ROOT, notebooks: Path = ROOT / "notebooks",
                   params_dir: Path = ROOT / "params", root: Path = ROOT, write_freshness: bool = False) -> int:
    """Print each notebook, its slug and what is published (current or stale,
    by :func:`sidebyside.publish.cache.freshness` with the parameters of
    ``params_dir``). Returns 2 when a published record is broken, a post's
    files are incomplete or a publication was left unfinished
    (:mod:`sidebyside.publish.state`; each is said on stderr with its fix), or when Jekyll would refuse to
    load a data file or a post's front matter (:func:`sidebyside.publish.records.site_rejects`), or would build a
    file of ``images/`` as a page (:func:`sidebyside.publish.records.site_pages_outside_posts`),
    or when a served folder holds what is not a regular file
    (:func:`sidebyside.publish.caps.unservable`). With
    ``write_freshness`` (``make site``), also write the answer into the
    site's ``_data/freshness.json`` for the home page's scoreboard."""
    from sidebyside.publish import caps, records, state

    everything = discover(notebooks)
    params_by_profile = load_all_params(params_dir, everything)
    unfinished = state.unfinished(site)  # read-only: `recover` (or execute, render) finishes or rolls them back
    for message in unfinished:
        print(f"error: {message}", file=sys.stderr)
    broken = len(unfinished)
    for info in select(everything, only):
        try:
            record = published_record(site, info.slug)
        except PublishError as exc:
            print(f"{info.slug:31} {info.relpath(root):38} BROKEN (see below)")
            print(f"error: {exc}", file=sys.stderr)
            broken += 1
            continue
        missing = state.incomplete(site, info.slug, record)
        if missing:
            print(f"{info.slug:31} {info.relpath(root):38} INCOMPLETE (see below)")
            print(f"error: {missing}", file=sys.stderr)
            broken += 1
            continue
        said_state = "not published"
        if record:
            current, _ = freshness(info, record, params_by_profile, root)
            said = {True: "current", False: "stale: its inputs changed since",
                    None: f"unknown: {record.get('profile')!r} is not a profile"}[current]
            said_state = f"{record['profile']} run of {record['executed_at']} ({said})"
        print(f"{info.slug:31} {info.relpath(root):38} {said_state}")
    for path in records.site_pages_outside_posts(site):  # what Jekyll would build as a page: only posts may be
        print(f"error: {path} begins with front matter (---): Jekyll would build it as a page of the site. Run "
              "`make execute ONLY=<its slug> FORCE=1` (or `git checkout -- <file>`) to replace it", file=sys.stderr)
        broken += 1
    for message in caps.unservable(site):  # Jekyll would block on a FIFO, or serve a link's target
        print(f"error: {message}: Jekyll would block on it or serve a file from elsewhere; "
              "remove it (`make execute ONLY=<its slug> FORCE=1` publishes a post's files again)",
              file=sys.stderr)
        broken += 1
    for message in records.site_rejects(site):  # what Jekyll itself would refuse, whichever post it is
        print(f"error: Jekyll would refuse to load {message}; the whole site would fail to build. Run "
              "`make execute ONLY=<its slug> FORCE=1` (or `git checkout -- <file>`) to replace it", file=sys.stderr)
        broken += 1
    if write_freshness and not broken:
        from sidebyside.publish import scoreboard

        scoreboard.write_freshness(site, select(everything, only), params_by_profile, root, everything)
    return 2 if broken else 0


def _limit(site: Path, slug: str, profile: str) -> float:
    """The whole run's time limit (:func:`sidebyside.publish.running.run_limit`): from the published run's recorded
    time where it is a run of ``profile`` that recorded one, else the default."""
    from sidebyside.publish.running import run_limit

    try:
        record = published_record(site, slug) or {}
    except PublishError:
        record = {}
    recorded = (record.get("provenance") or {}).get("run_s") if record.get("profile") == profile else None
    return run_limit(recorded if isinstance(recorded, (int, float)) else None)


def plan_gpu_calls(*, site: Path = ROOT, notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params",
                   only: str | None = None, everything: bool = False, call: int | None = None, posts: bool = False,
                   limit_s: float = 540.0, window_s: float = 1500.0, max_calls: int = 3, explain: bool = False,
                   write: bool = False, root: Path = ROOT) -> int:
    """The ``plan`` verb: print the calls (:mod:`sidebyside.publish.schedule`) of the stale GPU posts (every GPU
    post with ``everything``), or with ``call`` that call's posts alone, comma-separated, one per run (empty when
    there is no such call), or with ``posts`` the posts to run, unpacked, as a JSON list. ``explain``: first each
    post's budget, part by part, with where each figure comes from. ``write``: also commit-ready, the plan as
    ``gpu-runs/plan-<date>.json`` (:mod:`sidebyside.publish.fixedplan`), from a tree whose GPU inputs are
    committed; the box runs that file and never plans."""
    import json

    budgets = schedule.read_budgets(notebooks, params_dir)
    if explain:
        say(explain_budgets(budgets))
    slugs, params = stale_gpu_posts(budgets, site=site, notebooks=notebooks, params_dir=params_dir,
                                    everything=everything, only=only)
    if posts:
        print(json.dumps(slugs))
        return 0
    planned = schedule.plan_calls(budgets, params, slugs, root=site, limit_s=limit_s, window_s=window_s,
                                  max_calls=max_calls)
    if call is not None:
        calls = planned.calls
        print(",".join(calls[call - 1].slugs) if 1 <= call <= len(calls) else "")
        return 0
    say(format_plan(planned))
    if write:
        import datetime as dt

        from sidebyside.publish import fixedplan
        from sidebyside.run import runkey

        try:
            commit = runkey.commit_stamp(root, list(fixedplan.READS))
        except runkey.StampError as exc:
            raise PublishError(f"no plan written: {exc}") from None
        if commit.endswith("-dirty"):
            raise PublishError(f"no plan written: what a GPU run reads ({', '.join(fixedplan.READS)}) has "
                               "uncommitted changes; commit them first, so that the plan names the tree it was made from")
        document = fixedplan.plan_document(planned, root=root, commit=commit, made=dt.date.today(),
                                           calls_per_window=int(budgets.get("max_calls") or schedule.MAX_CALLS))
        say(f"wrote {fixedplan.write_plan(document, root)} (commit {commit}): commit it, then run its calls in "
            "order with CALL=n tools/device-run.sh, merging each call's output before the next")
    return 0


def explain_budgets(budgets: Mapping[str, Any]) -> str:
    """Each GPU post's budget, part by part, with how each figure was found (its ``derivation``, else its
    ``measured``), then the limits: what ``publish plan --explain`` prints first."""
    lines = ["GPU budgets (params/<slug>.yaml, gpu_budget), in device seconds:"]
    for slug, entry in (budgets.get("posts") or {}).items():
        derivation = entry.get("derivation") or {}
        lines.append(f"  {slug}: budget_s {entry.get('budget_s')}, rank {entry.get('rank', '-')}")
        for name, cost in (entry.get("parts") or {}).items():
            seconds = cost.get("each_s") if isinstance(cost, dict) else cost
            count = f" x {cost.get('count')}" if isinstance(cost, dict) else ""
            lines.append(f"    {name}: {seconds} s{count}; {derivation.get(name, 'see measured')}")
        if "budget_s" in derivation:
            lines.append(f"    budget_s: {derivation['budget_s']}")
        lines.append(f"    measured: {' '.join(str(entry.get('measured', '')).split())}")
    limits = ", ".join(f"{k} {budgets[k]}" for k in ("call_overhead_s", "run_overhead_s", "call_limit_s", "window_s",
                                                      "max_calls", "windows", "post_limit_s", "total_limit_s")
                       if k in budgets)
    return "\n".join(lines + [f"  limits (params/gpu-calls.yaml): {limits}"])


def posts_table(notebooks: Path = ROOT / "notebooks") -> str:
    """The README's table of posts, one row per notebook, from the notebooks' headers: slug, notebook,
    package and description."""
    rows = ["| post | notebook | package | what it finds out |", "|---|---|---|---|"]
    for info in discover(notebooks):
        description = " ".join(info.description.split()).replace("|", "\\|")
        rows.append(f"| `{info.slug}` | `notebooks/{info.path.name}` | `sidebyside.posts.{info.package}` | "
                    f"{description} |")
    return "\n".join(rows)


def write_readme(readme: Path = ROOT / "README.md", notebooks: Path = ROOT / "notebooks", *,
                 check: bool = False) -> int:
    """Write :func:`posts_table` between :data:`README_BEGIN` and :data:`README_END` in ``readme``; with
    ``check``, write nothing and return 1 (saying so) when the table there differs."""
    text = readme.read_text(encoding="utf-8")
    if text.count(README_BEGIN) != 1 or text.count(README_END) != 1:
        raise PublishError(f"{readme} must hold the lines {README_BEGIN!r} and {README_END!r} once each, around "
                           "the table of posts")
    head, rest = text.split(README_BEGIN)
    _, tail = rest.split(README_END)
    updated = f"{head}{README_BEGIN}\n{posts_table(notebooks)}\n{README_END}{tail}"
    if updated == text:
        return 0
    if check:
        say(f"{readme}: its table of posts differs from the notebooks' headers; run: make readme")
        return 1
    readme.write_text(updated, encoding="utf-8")
    say(f"{readme}: the table of posts written from the notebooks' headers")
    return 0


def stale_gpu_posts(budgets: Mapping[str, Any], *, site: Path = ROOT, notebooks: Path = ROOT / "notebooks",
                    params_dir: Path = ROOT / "params", root: Path = ROOT, everything: bool = False,
                    only: str | None = None) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The GPU posts (those with a ``gpu`` budget in their header) whose gpu result is not
    current (all of them with ``everything``: one commit for every post), ranked ones first,
    and their gpu parameters."""
    infos = discover(notebooks)
    params = load_all_params(params_dir, infos)
    gpu_infos = [i for i in select(infos, only) if i.slug in (budgets.get("posts") or {})]
    decisions = plan(gpu_infos, "gpu", params, site, force=everything, root=root)
    stale = [d.info.slug for d in decisions if d.action == "run"]
    order = [s for s in (budgets.get("order") or []) if s in stale]
    return order + [s for s in stale if s not in order], params["gpu"]


def format_plan(plan: schedule.Plan) -> str:
    """The plan, one line per call and run, in the order each call runs them; a run in parts says the second
    of its call by which its parts end, and what of a run's cost is estimated says so; then each post whose
    header plans no GPU section (``gpu.not_planned``), with why."""
    skipped = [f"  {slug}: no GPU section planned (its gpu_budget.not_planned): {why}"
               for slug, why in plan.not_planned.items()]
    if not plan.calls:
        return "\n".join(["nothing to run: every GPU post is current", *skipped])
    lines = [f"{len(plan.calls)} call(s), {plan.seconds:.0f} of {plan.window_s:.0f} device seconds "
             f"(each call at most {plan.limit_s:.0f} s, counted from its start):"]
    for n, call in enumerate(plan.calls, 1):
        lines.append(f"  call {n}: {call.seconds:.0f} s ({call.overhead_s:.0f} s set-up): "
                     f"CALL={n} tools/device-run.sh")
        end = call.overhead_s
        for k, run in enumerate(call.runs):
            end += run.seconds
            what = f"parts {', '.join(run.parts)}" if run.parts else "the whole post"
            if run.deadline_s:
                what += f" (its parts end by {run.deadline_s:.0f} s of the call, its run_budget_s)"
            if run.last:
                what += " (its last: publish merge then publishes the post)"
            elif all(r.slug != run.slug for r in call.runs[k + 1:]):
                what += "; goes on in a later call: merge this call's archive, then plan and run the next call"
            lines.append(f"    {run.slug}: {run.seconds:.0f} s, ends by {end:.0f} s; {what}")
            for note in run.estimated:
                lines.append(f"      ESTIMATE: {note}")
    for slug, parts in plan.done.items():
        if parts:
            lines.append(f"  {slug}: {len(parts)} part(s) read back from committed checkpoints: {', '.join(parts)}")
    return "\n".join(lines + skipped)
