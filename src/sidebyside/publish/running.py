"""Running one notebook with papermill, under the run context
(:mod:`sidebyside.run.context`), and completing the record it saved."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sidebyside.lab import conditions
from sidebyside.publish import escape
from sidebyside.publish.cache import cache_key
from sidebyside.publish.common import ANSI_RE, ROOT, PublishError, say, warn
from sidebyside.publish.discovery import NotebookInfo
from sidebyside.publish.params import settings_file
from sidebyside.publish.preprocess import scrub, scrub_rules
from sidebyside.run import context, provenance, runkey

__all__ = ["execute", "complete_record", "check_before_running", "key_and_stamp", "check_machine"]

#: How many kernels one run starts before it gives up on a kernel that dies before it answers. A kernel's ports
#: are picked free by its manager, released, then bound by the kernel; a process that starts meanwhile (another
#: kernel, a worker's rendezvous) can take one, and the kernel exits with "Address already in use" before it runs
#: a cell (papermill issue 511). Nothing ran, so a fresh kernel, with fresh ports, is the same run.
KERNEL_STARTS = 3
KERNEL_DIED = "Kernel died before replying to kernel_info"


def _format_failure(exc, info: NotebookInfo, nb_path: Path, executed: Path) -> str:
    cell = getattr(exc, "cell_index", None)
    source = (getattr(exc, "source", "") or "").strip().splitlines()
    first = next((line for line in source if line.strip() and not line.startswith("#")), source[0] if source else "")
    ename, evalue = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
    return (
        f"FAILED {info.slug} ({nb_path}): cell {cell} [{first[:80]}] raised {ename}: {ANSI_RE.sub('', str(evalue))}\n"
        f"  the executed copy, with the traceback, is kept at {executed}\n"
        f"  nothing published was changed"
    )


def execute(info: NotebookInfo, nb, profile: str, params: dict[str, Any], build: Path, *,
            root: Path = ROOT, progress: bool = True, timeout: int | None = None,
            aa: bool = False) -> tuple[Path, dict[str, Any]]:
    """Run one notebook with papermill into ``build/executed/<slug>.ipynb``,
    its kernel working in a scratch directory of its own, ``build/scratch/<slug>/``
    (emptied first), with a compilation cache of its own removed after it unless the environment names one,
    never in the repository or the site (a run in parts reaches the repository's
    checkpoint folder through a link, :func:`_link_checkpoint_folder`).

    Returns the executed path and the results record the notebook saved. Raises
    :class:`PublishError` with the failing cell and error. ``aa``: an A/A run (every timed
    contestant races the first one's function, :func:`sidebyside.lab.pool.aa`).
    """
    import jupytext
    import papermill

    executed_dir, results_dir, input_dir = build / "executed", build / "results", build / "input"
    for d in (executed_dir, results_dir, input_dir):
        d.mkdir(parents=True, exist_ok=True)
    input_path = input_dir / f"{info.slug}.ipynb"
    jupytext.write(nb, input_path)
    executed = executed_dir / f"{info.slug}.ipynb"
    results_path = results_dir / f"{info.slug}.json"
    results_path.unlink(missing_ok=True)
    scratch = build / "scratch" / info.slug  # the kernel's working directory: nothing else of the tree
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    _link_checkpoint_folder(params, scratch, root)
    run_context = context.RunContext(slug=info.slug, profile=profile, results_dir=results_dir, root=root,
                                     headless=True, inputs=runkey.declared_inputs(info.path, profile, params, root),
                                     aa=aa)
    env = {
        **run_context.env(),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    # The run's compilation cache (sidebyside.lab.conditions), made and removed here unless the caller gave one
    # (a test run's, a device call's): the kernel cannot remove it itself, since its manager may stop it with a
    # signal, which runs no exit handler.
    own_cache = None if os.environ.get(conditions.CACHE_ENV) else tempfile.mkdtemp(prefix="sidebyside-compile-")
    if own_cache:
        env[conditions.CACHE_ENV] = own_cache
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        for start in range(1, KERNEL_STARTS + 1):
            try:
                papermill.execute_notebook(
                    str(input_path), str(executed), parameters=params, kernel_name=nb.metadata["kernelspec"]["name"],
                    cwd=str(scratch), progress_bar=progress, log_output=False, execution_timeout=timeout,
                )
                break
            except RuntimeError as exc:
                if KERNEL_DIED not in str(exc) or start == KERNEL_STARTS:
                    raise
                warn(f"{info.slug}: its kernel exited before it ran a cell (most often a port taken while it "
                     f"started: its error is printed above); starting a fresh kernel, {start + 1} of {KERNEL_STARTS}")
    except papermill.PapermillExecutionError as exc:
        raise PublishError(_format_failure(exc, info, info.path, executed)) from None
    except Exception as exc:
        died = (f"  its kernel died before it ran a cell, {KERNEL_STARTS} times: its own error is printed above; run "
                f"the kernel's command (jupyter kernelspec list) by hand to see why\n" if KERNEL_DIED in str(exc) else "")
        raise PublishError(f"FAILED {info.slug} ({info.path}): {type(exc).__name__}: {exc}\n{died}"
                           f"  executed copy (if any): {executed}; nothing published was changed") from exc
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if own_cache:
            shutil.rmtree(own_cache, ignore_errors=True)
    if not results_path.is_file():
        raise PublishError(
            f"FAILED {info.slug} ({info.path}): the run saved no results. End the notebook with "
            f"sidebyside.run.provenance.save_results(metrics). Nothing published was changed."
        )
    record = json.loads(results_path.read_text())
    if record.get("slug") != info.slug:
        raise PublishError(f"{info.path}: save_results was called with slug {record.get('slug')!r}, expected {info.slug!r}")
    check_machine(record, info.slug)
    return executed, record


def _link_checkpoint_folder(params: dict[str, Any], scratch: Path, root: Path) -> None:
    """A run in parts names its ``checkpoint_file`` relative to the repository (params/<slug>.yaml), where the
    planner reads it and a call packs it; the kernel works in ``scratch``, so the file's top folder is
    linked there (made in the repository if missing). A bare file name is refused: the file is replaced
    whole at each save, which would replace a link to the file itself in ``scratch``, not the file."""
    name = params.get("checkpoint_file")
    if not name or Path(name).is_absolute():
        return
    if len(Path(name).parts) < 2:
        raise PublishError(f"checkpoint_file {name!r} names no folder: give it inside one, relative to the repository "
                           f"(checkpoint_file: checkpoints/{name}), so that the run reaches it from its scratch folder; "
                           "nothing was run")
    top = Path(name).parts[0]
    (root / top).mkdir(parents=True, exist_ok=True)
    (scratch / top).symlink_to((root / top).resolve(), target_is_directory=True)


def check_machine(record: dict[str, Any], slug: str) -> list[str]:
    """Say what the quiet-machine check found busy in a saved record (``provenance.machine``,
    :mod:`sidebyside.lab.quiet`) and return it. It never refuses: load widens the intervals, and
    each speed verdict it touched already says so, with its figures."""
    machine = (record.get("provenance") or {}).get("machine") or {}
    findings = [str(f) for f in machine.get("findings") or []]
    if findings:
        say(f"{slug}: the machine was busy during some timed sections (shown beside the verdicts they touched): "
            + "; ".join(findings[:3]) + (f"; and {len(findings) - 3} more" if len(findings) > 3 else ""))
    return findings


def complete_record(saved: dict[str, Any], info: NotebookInfo, profile: str, params: dict[str, Any], key: str, root: Path) -> dict[str, Any]:
    """The published results file: what the notebook saved plus run facts,
    every string without control characters, paths or the host name. A gpu run whose
    record does not show PyTorch and JAX on the same GPU raises :class:`PublishError`."""
    if profile == "gpu":
        try:
            provenance.check_gpu_profile(saved["provenance"], driver_gpu=True)
        except provenance.GPUProfileError as exc:
            raise PublishError(f"{info.slug}: the run's own record refuses the gpu profile: {exc}") from None
    rules = scrub_rules(root)
    return escape.clean(context.results_record(
        slug=info.slug,
        notebook=info.relpath(root),
        profile=profile,
        executed_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        source_hash=key,
        inputs=saved.get("inputs"),
        parameters=params,
        provenance=saved["provenance"],
        code=saved.get("code"),
        metrics=saved["metrics"],
    ), lambda text: scrub(escape.drop_controls(text), rules))


def check_before_running(profile: str, root: Path) -> None:
    """Refuse, before anything runs, a tree whose commit cannot be told and a
    gpu profile that PyTorch and JAX would not both run on the GPU."""
    try:
        runkey.commit_stamp(root, [])
        if profile == "gpu":
            gpu = provenance.check_gpu_profile(provenance.probe_devices(), driver_gpu=provenance.gpu_present())
            say(f"gpu: PyTorch and JAX both compute on {gpu}")
    except (runkey.StampError, provenance.GPUProfileError) as exc:
        raise PublishError(str(exc)) from None


def key_and_stamp(info: NotebookInfo, profile: str, params: dict[str, Any], params_dir: Path,
                   saved: dict[str, Any], root: Path) -> tuple[str, str]:
    """A finished run's key and commit, both from the inputs it recorded."""
    inputs = saved.get("inputs")
    paths = runkey.input_paths(info.path, settings_file(params_dir, info.slug), profile, inputs, root)
    try:
        return cache_key(info, profile, params, root, inputs), runkey.commit_stamp(root, paths)
    except runkey.StampError as exc:
        raise PublishError(str(exc)) from None

