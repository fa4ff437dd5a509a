"""Running one notebook with papermill, under the run context
(:mod:`sidebyside.run.context`), and completing the record it saved.

Nothing a run writes is read by a later step as code, configuration or its input, but what the
publisher takes back itself: the executed copy and results (staged, :class:`_Child`) and the post's
checkpoint file, which is ``checkpoints/<slug>.json`` or none (:func:`checkpoint_name`), copied in
and out of the run's scratch folder. A run's compilation cache is its own, in the build's scratch
space (``build/scratch/<slug>.compile/``), removed after it; a cache the caller names
(``SIDEBYSIDE_COMPILE_CACHE``: a test session's, a device call's) is shared by the runs it starts,
which is for a caller that owns every one of them. The native grid_sample kernel built by ``make
native`` is shown to a run read-only, through links in a folder of the run's own, where a kernel
the run builds itself goes and is dropped with it (:func:`native_folder`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sidebyside.lab import conditions
from sidebyside.publish import escape, sandbox
from sidebyside.publish.cache import cache_key
from sidebyside.publish.common import ANSI_RE, ROOT, PublishError, say, warn
from sidebyside.publish.discovery import NotebookInfo
from sidebyside.publish.params import settings_file
from sidebyside.publish.preprocess import scrub, scrub_rules
from sidebyside.run import context, provenance, runkey

__all__ = ["execute", "run_limit", "complete_record", "check_before_running", "key_and_stamp",
           "check_machine", "checkpoint_name", "stage_checkpoint", "keep_checkpoint",
           "native_folder", "NATIVE_ENV", "CHECKPOINTS", "CHECKPOINT_MAX_BYTES"]

#: How many kernels one run starts before it gives up on a kernel that dies before it answers. A kernel's ports
#: are picked free by its manager, released, then bound by the kernel; a process that starts meanwhile (another
#: kernel, a worker's rendezvous) can take one, and the kernel exits with "Address already in use" before it runs
#: a cell (papermill issue 511). Nothing ran, so a fresh kernel, with fresh ports, is the same run.
KERNEL_STARTS = 3
KERNEL_DIED = "Kernel died before replying to kernel_info"
#: A whole run's time limit where its caller knows no better (seconds): longer than any post's cpu
#: or gpu run.
RUN_LIMIT_S = 6 * 3600
#: Where the caller knows the post's recorded run time: this many times it, at least
#: RUN_LIMIT_FLOOR_S.
RUN_LIMIT_MARGIN = 3.0
RUN_LIMIT_FLOOR_S = 600
#: The folder of the repository that holds each post's checkpoint file, ``<slug>.json``.
CHECKPOINTS = "checkpoints"
#: The largest checkpoint file taken back from a run (bytes); a larger one is left in its scratch.
CHECKPOINT_MAX_BYTES = 64 * 2**20
#: Where :mod:`sidebyside.grid_sample.native` keeps its built kernel (default
#: ``~/.cache/sidebyside``).
NATIVE_ENV = "SIDEBYSIDE_NATIVE_CACHE"


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


def run_limit(recorded_s: float | None = None) -> float:
    """A whole run's time limit, in seconds: :data:`RUN_LIMIT_MARGIN` times the post's recorded
    run time where the caller knows it (at least :data:`RUN_LIMIT_FLOOR_S`), else
    :data:`RUN_LIMIT_S`."""
    if recorded_s is None or recorded_s <= 0:
        return float(RUN_LIMIT_S)
    return max(float(RUN_LIMIT_FLOOR_S), RUN_LIMIT_MARGIN * float(recorded_s))


def execute(info: NotebookInfo, nb, profile: str, params: dict[str, Any], build: Path, *,
            root: Path = ROOT, progress: bool = True, timeout: int | None = None,
            aa: bool = False, limit: float | None = None) -> tuple[Path, dict[str, Any]]:
    """Run one notebook with papermill into ``build/executed/<slug>.ipynb``,
    its kernel working in a scratch directory of its own, ``build/scratch/<slug>/``
    (emptied first), with a compilation cache of its own, ``build/scratch/<slug>.compile/``, removed
    after it, unless the environment names one (shared: see the module), never in the repository or
    the site (a run in parts finds its checkpoint file, :func:`checkpoint_name`, at the same
    relative path in its scratch folder: :func:`stage_checkpoint`, and it is taken back however the
    run ends: :func:`keep_checkpoint`). Papermill and its kernel run in a child process, in the
    sandbox of :mod:`sidebyside.publish.sandbox` where it works.

    ``timeout``: each cell's limit (seconds; None: none). ``limit``: the whole run's (seconds; None:
    :func:`run_limit`'s default); a run past it is ended, every process of it, and fails.
    Returns the executed path and the results record the notebook saved. Raises
    :class:`PublishError` with the failing cell and error (and, before anything runs, for a
    ``checkpoint_file`` that is not the slug's). ``aa``: an A/A run (every timed contestant races
    the first one's function, :func:`sidebyside.lab.pool.aa`).
    """
    import jupytext

    executed_dir, results_dir, input_dir = build / "executed", build / "results", build / "input"
    checkpoint = checkpoint_name(params, info.slug)
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
    try:
        sandboxed = sandbox.enabled()
    except ValueError as exc:
        raise PublishError(f"{info.slug}: {exc}; nothing was run") from None
    run_context = context.RunContext(slug=info.slug, profile=profile, results_dir=results_dir, root=root,
                                     headless=True, inputs=runkey.declared_inputs(info.path, profile, params, root),
                                     aa=aa)
    env = {
        **run_context.env(),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    own_cache = _own_cache(env, scratch)
    child = _Child(info, build, input_path, executed, scratch, params,
                   nb.metadata["kernelspec"]["name"], progress, timeout, {**os.environ, **env},
                   root if sandboxed else None)
    limit = run_limit() if limit is None else limit
    try:
        stage_checkpoint(checkpoint, scratch, root)
        for start in range(1, KERNEL_STARTS + 1):
            outcome = child.run(limit)
            died = outcome["kind"] == "error" and KERNEL_DIED in outcome["message"]
            if not died or start == KERNEL_STARTS:
                break
            warn(f"{info.slug}: its kernel exited before it ran a cell (most often a port taken "
                 f"while it started: its error is printed above); starting a fresh kernel, "
                 f"{start + 1} of {KERNEL_STARTS}")
    finally:
        keep_checkpoint(checkpoint, scratch, root)
        if own_cache:
            shutil.rmtree(own_cache, ignore_errors=True)
    _raise_for(outcome, info, executed, limit)
    if not results_path.is_file():
        raise PublishError(
            f"FAILED {info.slug} ({info.path}): the run saved no results. End the notebook with "
            f"sidebyside.run.provenance.save_results(metrics). Nothing published was changed."
        )
    from sidebyside.publish.records import load_record

    record = load_record(results_path, info.slug)  # within its caps, its depth counted first
    if record.get("slug") != info.slug:
        raise PublishError(f"{info.path}: save_results was called with slug {record.get('slug')!r}, expected {info.slug!r}")
    check_machine(record, info.slug)
    return executed, record


def _own_cache(env: dict[str, str], scratch: Path) -> Path | None:
    """The run's compilation cache (:mod:`sidebyside.lab.conditions`), made here, in the build's
    scratch space, and set in ``env``, unless the caller named one (returns None): the kernel
    cannot remove it itself, since its manager may stop it with a signal, which runs no exit
    handler. A cache the caller names is shared by every run it starts (see the module)."""
    if os.environ.get(conditions.CACHE_ENV):
        return None
    cache = scratch.with_name(f"{scratch.name}.compile")
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    env[conditions.CACHE_ENV] = str(cache.resolve())
    return cache


def _raise_for(outcome: dict[str, Any], info: NotebookInfo, executed: Path, limit: float) -> None:
    """Raise the :class:`PublishError` that says how a run that did not end well ended."""
    if outcome["kind"] == "cell":
        raise PublishError(_format_failure(SimpleNamespace(**outcome), info, info.path, executed))
    if outcome["kind"] == "timeout":
        cell = outcome.get("cell") or {}
        source = str(cell.get("source") or "").strip().splitlines()
        first = next((line for line in source if line.strip() and not line.startswith("#")), "")
        index = cell.get("index")
        running = f"cell {index} [{first[:80]}]" if index is not None else "no cell yet"
        raise PublishError(
            f"FAILED {info.slug} ({info.path}): the run passed its time limit of {limit:.0f} s "
            f"while {running} ran, and was stopped, every process of it with it (the limit: "
            f"execute's limit, by default sidebyside.publish.running.RUN_LIMIT_S)\n  executed copy "
            f"(if any): {executed}; nothing published was changed")
    if outcome["kind"] == "error":
        message = outcome["message"]
        died = (f"  its kernel died before it ran a cell, {KERNEL_STARTS} times: its own error is "
                f"printed above; run the kernel's command (jupyter kernelspec list) by hand to see "
                f"why\n" if KERNEL_DIED in message else "")
        raise PublishError(f"FAILED {info.slug} ({info.path}): {outcome['type']}: {message}\n{died}"
                           f"  executed copy (if any): {executed}; nothing published was changed")


class _Child:
    """One notebook's run as a child process (:func:`sidebyside.publish.sandbox.main`): sandboxed
    when ``root`` is given (the checkout the run belongs to), a plain child otherwise. Its outcome
    and the cell it ran last are written in ``build/sandbox/<slug>/run/``; sandboxed, its executed
    copy and results go to ``build/sandbox/<slug>/`` (shown to it at their own places), and only
    the slug's are taken back."""

    def __init__(self, info: NotebookInfo, build: Path, input_path: Path, executed: Path,
                 scratch: Path, params: dict[str, Any], kernel: str, progress: bool,
                 timeout: int | None, env: dict[str, str], root: Path | None) -> None:
        self.info, self.executed, self.root = info, executed, root
        self.results = build.resolve() / "results" / f"{info.slug}.json"
        self.staging = build.resolve() / "sandbox" / info.slug
        given = env.get(NATIVE_ENV) or str(Path.home() / ".cache" / "sidebyside")
        self.native = Path(given).expanduser().resolve()
        self.env = {**env, NATIVE_ENV: str(self.staging / "native")}
        self.job = {"input": str(input_path.resolve()), "output": str(executed.resolve()),
                    "parameters": params, "kernel": kernel, "cwd": str(scratch.resolve()),
                    "progress": progress, "timeout": timeout,
                    "cell_file": str(self.staging / "run" / "cell.json"),
                    "outcome": str(self.staging / "run" / "outcome.json")}

    def run(self, limit: float) -> dict[str, Any]:
        """Run it once; its outcome (``sandbox.execute_job``'s, or ``{"kind": "timeout", "cell"}``,
        the cell it ran last, or None)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        for part in ("run", "executed", "results"):
            (self.staging / part).mkdir(parents=True)
        native_folder(self.native, self.staging / "native")
        self.executed.unlink(missing_ok=True)
        command = sandbox.child_command(self.job)
        if self.root is None:
            finished = sandbox.run(command, self.env, limit)
        else:
            box, env = _box(self.job, self.staging, self.root, self.env)
            box.read.append(self.native)
            line = sandbox.bwrap_argv(shutil.which("bwrap") or "bwrap", box, command)
            finished = sandbox.run(line, env, limit)
            for staged, kept in ((self.staging / "executed" / self.executed.name, self.executed),
                                 (self.staging / "results" / self.results.name, self.results)):
                if staged.is_file() and not staged.is_symlink():
                    shutil.move(staged, kept)
        cell_file, outcome_file = Path(self.job["cell_file"]), Path(self.job["outcome"])
        if finished.timed_out:
            return {"kind": "timeout", "cell": _read_json(cell_file)}
        outcome = _read_json(outcome_file)
        if not isinstance(outcome, dict) or outcome.get("kind") not in {"ok", "cell", "error"}:
            return {"kind": "error", "type": "RunExited",
                    "message": f"the run's process exited with status {finished.returncode} "
                               f"without saying how its notebook ended (its output is above)"}
        return outcome


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _box(job: dict[str, Any], staging: Path, root: Path,
         env: dict[str, str]) -> tuple[sandbox.Box, dict[str, str]]:
    """The sandbox of one run (:class:`sidebyside.publish.sandbox.Box`) and its environment:
    read-only, the checkout, this library's, the interpreter and its venv, the notebook, the data
    and the kernel's files; writable, the scratch folder (its checkpoint file's copy in it), the
    staged outputs (the native kernel's folder of this run among them), the compilation cache."""
    allowed = sandbox.allowance()
    executed, scratch = Path(job["output"]), Path(job["cwd"])
    read = [root, ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
            Path(job["input"]).parent]
    if env.get("FASHION_MNIST_DIR"):
        read.append(Path(env["FASHION_MNIST_DIR"]))
    kernel_files, data_dir = _kernel_files(job["kernel"])
    write = [scratch, staging / "run", staging / "native"]
    env = dict(env)
    for name in (conditions.CACHE_ENV, "SIDEBYSIDE_PARTS_OUT"):
        if env.get(name):
            Path(env[name]).mkdir(parents=True, exist_ok=True)
            write.append(Path(env[name]))
    if data_dir:
        paths = [str(data_dir), env.get("JUPYTER_PATH")]
        env["JUPYTER_PATH"] = os.pathsep.join(p for p in paths if p)
    box = sandbox.Box(cwd=scratch.resolve(), share_net=allowed["share_net"],
                      read=[p.resolve() for p in read + kernel_files + allowed["read"]],
                      write=[p.resolve() for p in write + allowed["write"]],
                      moved={executed.parent: staging / "executed",
                             Path(env[context.ENV["results_dir"]]).resolve(): staging / "results"})
    return box, sandbox.environment(env, allowed["env"])


def _kernel_files(name: str) -> tuple[list[Path], Path | None]:
    """The files the kernel ``name`` needs, as this process finds its spec (its folder; each
    absolute path of its command, a ``bin/`` entry by the folder above it, a link by itself and its
    target), and the Jupyter data folder that holds its spec (None: not found, or not in a
    ``kernels/`` folder)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:  # papermill says so, inside
        return [], None
    resource = Path(spec.resource_dir)
    found = [resource]
    for arg in spec.argv:
        if not arg.startswith("/") or not Path(arg).exists():
            continue
        for path in (Path(arg), Path(arg).resolve()):
            found.append(path.parent.parent if path.parent.name == "bin" else path)
    return found, resource.parent.parent if resource.parent.name == "kernels" else None


def checkpoint_name(params: dict[str, Any], slug: str) -> str | None:
    """The post's checkpoint file, relative to the repository, as ``params`` sets it: None where it
    sets none (``checkpoint_file`` absent, null or ``""``: a run in one piece), else
    ``checkpoints/<slug>.json``, the only name it may give: the planner reads it and a device call
    packs it, so a post names no other file. Raises :class:`PublishError` for any other value."""
    name = params.get("checkpoint_file")
    if name is None or name == "":
        return None
    own = f"{CHECKPOINTS}/{slug}.json"
    if name != own:
        raise PublishError(
            f"{slug}: checkpoint_file {name!r} is not this post's checkpoint file: a run in "
            f"parts keeps it at {own} (set checkpoint_file: {own} in params/{slug}.yaml), and a "
            f'run in one piece sets checkpoint_file: "" or none; nothing was run')
    return own


def stage_checkpoint(name: str | None, scratch: Path, root: Path) -> None:
    """Show the run the post's checkpoint file ``name`` (:func:`checkpoint_name`) at the same
    relative path in its working folder ``scratch``: a copy of the repository's, where it is a
    plain file (a link is not followed), in a folder of the run's own. The run may replace it whole,
    and writes no other file of the repository's ``checkpoints/``."""
    if name is None:
        return
    folder = (scratch / name).parent
    folder.mkdir(parents=True, exist_ok=True)
    kept = root / name
    if kept.is_file() and not kept.is_symlink():
        shutil.copyfile(kept, scratch / name)


def keep_checkpoint(name: str | None, scratch: Path, root: Path) -> bool:
    """Take back the checkpoint file ``name`` the run left in ``scratch`` into the repository
    (however the run ended: a run in parts stops before its budget ends), replacing the file there
    whole. Only a plain file in a plain folder of at most :data:`CHECKPOINT_MAX_BYTES` is taken (a
    link, or anything else, is said and left); the other files of that folder never are. Returns
    whether it was taken."""
    if name is None:
        return False
    made = scratch / name
    if not made.exists() and not made.is_symlink():
        return False
    folder_ok = all(not (scratch / part).is_symlink() for part in Path(name).parents if part.parts)
    if not folder_ok or made.is_symlink() or not made.is_file():
        warn(f"the run left {name} as a link or not as a plain file; it was not taken back "
             f"(the repository's {name} is as it was before the run)")
        return False
    if made.stat().st_size > CHECKPOINT_MAX_BYTES:
        warn(f"the run's {name} is {made.stat().st_size} bytes, over {CHECKPOINT_MAX_BYTES}; it "
             f"was not taken back (it stays in {made})")
        return False
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.taking")
    shutil.copyfile(made, partial)
    os.replace(partial, target)
    return True


def native_folder(source: Path, folder: Path) -> Path:
    """Make ``folder`` (emptied first) the run's native-kernel cache: a link to each plain file of
    ``source`` (the cache ``make native`` built into, shown read-only in the sandbox), so that the
    run loads the kernel built there and cannot change it, and a kernel the run builds itself (a
    new jaxlib, another CPU) goes into ``folder``, its own, which no later run reads. Returns
    ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if source.is_dir():
        for path in sorted(source.iterdir()):
            if path.is_file() and not path.is_symlink():
                (folder / path.name).symlink_to(path.resolve())
    return folder


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

