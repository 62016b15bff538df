"""Running the contract's acceptance commands: in the sandbox (`hub.safety.sandbox`), each in its own process
group, with a timeout that kills the whole tree, within `sandbox.limits` (`hub.safety.limits`).

What a command prints is kept to its tail and passed through the secret redactor (`hub.core.redaction`)
before anything else sees it: it goes into prompts, records, halts and REVIEW_REQUEST.md.
A command that runs pytest must also leave pytest's own report of the run (issue 28: code calling
`os._exit(0)` at import, or a conftest.py emptying the collection, made pytest exit 0): at least one test
run and none failed, else the command fails with that reason though it exited 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from hub.state.contract import AcceptanceResult

from hub.core.config import Config
from hub.core.faults import crash_point
from hub.core.log import get_logger
from hub.core.redaction import Redactor, redactor, user_secrets
from hub.repo.child import PIPE, Child
from hub.safety.limits import XFSZ_EXITS, Watch, remove_written
from hub.safety.sandbox import Jail, absent, prepare, remove_created
from hub.safety.trust import control_paths

log = get_logger(__name__)

TAIL = 4000
# Bytes of each stream the hub keeps (the end of it): a command printing for as long as its clock runs
# must not fill the hub's memory (400 MB printed held 1.2 GB resident when all of it was kept).
CAPTURE = 256 * 1024
# Characters of each stream a result holds, redacted: more than any prompt or record shows (8,000), and
# few enough for the secret scanner to read in milliseconds.
SHOWN = 16 * 1024
CUT_MARGIN = 256  # longer than any one-line secret
# A command that runs pytest (`pytest`, `python -m pytest`, `py.test`, through make or tox alike).
PYTEST = re.compile(r"(?<![\w./-])(py\.test|pytest)(?![\w-])")
REPORT_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    # Why the command failed though its exit code alone would not say: `resource_limit: ...`,
    # `no_tests_run: ...` (the pytest report's verdict). None when the exit code tells all.
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.failure is None

    def summary(self) -> AcceptanceResult:
        summary: AcceptanceResult = {
            "command": self.command,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "timed_out": self.timed_out,
        }
        if self.failure:
            summary["failure"] = self.failure
        return summary

    def feedback(self) -> str:
        what = "timed out" if self.timed_out else f"exited {self.exit_code}"
        if self.failure:
            what += f"; {self.failure}"
        out = (
            self.stdout[-TAIL:] + ("\n" if self.stdout and self.stderr else "") + self.stderr[-TAIL:]
        ).strip()
        return f"$ {self.command}\n({what})\n{out}"


def run_command(
    command: str,
    cwd: Path,
    timeout: float,
    jail: Jail | None = None,
    pidfile: Path | None = None,
    crash_at: str = "acceptance:running",
) -> CommandResult:
    """Run one shell command (in `jail` when given); on timeout kill its whole process group, so no child
    outlives it. In the sandbox the command also has a PID namespace of its own: killing bwrap ends
    every process in it, even one that left the process group with setsid, and `sandbox.limits` bound
    it (past one: killed, what it wrote removed, a `resource_limit` failure). `pidfile` records the
    sandbox's init (unsandboxed: the command's group) while it runs, for the task's next phase to end
    should the hub be killed meanwhile (hub.repo.leftovers): bwrap arms its die-with-parent only after it
    has forked, and unsandboxed nothing dies with the hub. What it printed comes back redacted.
    `crash_at` names its crash point (hub.core.faults) while it runs."""
    started = time.perf_counter()
    report = _ReportFolder() if PYTEST.search(command) else None
    try:
        result = _run(command, cwd, timeout, jail, pidfile, report, crash_at)
        if report is not None and result.ok:
            result = replace(result, failure=report.verdict())
    finally:
        if report is not None:
            report.close()
    secrets = (jail.redactor if jail else None) or redactor(folders=[cwd, Path.home()])
    return replace(
        result,
        stdout=_shown(result.stdout, secrets),
        stderr=_shown(result.stderr, secrets),
        seconds=time.perf_counter() - started,
    )


def _run(
    command: str,
    cwd: Path,
    timeout: float,
    jail: Jail | None,
    pidfile: Path | None,
    report: _ReportFolder | None,
    crash_at: str,
) -> CommandResult:
    sandboxed = jail is not None and jail.sandboxed
    # bwrap writes to --info-fd once the sandbox stands (its die-with-parent armed) and closes it: until
    # then a kill of the hub could leave a sandbox starting up without a parent to die with.
    info_read, info_write = os.pipe() if sandboxed else (-1, -1)
    were_absent = absent(jail.guarded) if jail else []
    env = dict(jail.env) if jail else None
    argv: list[str] | str = command
    if jail:
        binds = [report.folder] if report and sandboxed else []
        argv = jail.argv(command, cwd, info_fd=info_write if sandboxed else None, binds=binds)
    if report is not None:
        env = {**(env if env is not None else os.environ), "PYTEST_ADDOPTS": report.addopts(env)}
    try:
        child = Child(
            argv,
            shell=jail is None,
            env=env,
            cwd=cwd,
            stdout=PIPE,
            stderr=PIPE,
            pass_fds=(info_write,) if sandboxed else (),
            preexec_fn=jail.preexec if jail and sandboxed else None,
        )
    finally:
        if sandboxed:
            os.close(info_write)
    with child:
        watch = None
        if sandboxed:
            assert jail is not None
            with os.fdopen(info_read, "rb") as info:
                init = _init_pid(info.read())
            if init is not None:
                child.remember(pidfile, init, group=False)
                watch = Watch(jail.limits, init, cwd.resolve(), child.end)
        else:
            # Unsandboxed, the command's process group is what a later phase can still end.
            child.remember(pidfile)
        crash_point(crash_at)
        assert child.proc.stdout is not None and child.proc.stderr is not None
        readers = [_Tail(child.proc.stdout), _Tail(child.proc.stderr)]
        with child.clock(timeout):
            exit_code = child.proc.wait()
        timed_out = child.timed_out
        if watch is not None:
            watch.stop()
        # What it left in its group goes before its output is read: it may hold the pipes open.
        child.end()
        stdout, stderr = (reader.text() for reader in readers)
    failure = None
    if watch is not None and (watch.exceeded or exit_code in XFSZ_EXITS):
        assert jail is not None
        past = watch.exceeded or f"a file of {jail.limits.disk_mb} MiB (sandbox.limits.disk_mb)"
        failure = f"resource_limit: {past}"
        removed = remove_written(cwd.resolve(), watch.started)
        stderr += f"\nhub: the command was ended: {failure}; {len(removed)} files it wrote were removed"
        log.warning("acceptance.resource_limit", command=command, failure=failure, removed=len(removed))
        exit_code = exit_code or 1
    created = remove_created(were_absent)
    if created:
        names = ", ".join(
            sorted(p.relative_to(cwd).as_posix() if p.is_relative_to(cwd) else str(p) for p in created)
        )
        stderr += (
            f"\nhub: the command created the hub's control files {names}; removed, and the command fails"
        )
        log.warning("acceptance.control_files_created", paths=names)
        exit_code = exit_code or 1
    return CommandResult(command, exit_code, stdout, stderr, 0.0, timed_out, failure)


def _shown(text: str, secrets: Redactor) -> str:
    """The last SHOWN characters of `text`, redacted. Where the cut falls inside a line, the line's
    first CUT_MARGIN characters go too: a secret cut in half would pass the scanner."""
    if len(text) > SHOWN:
        tail = text[-SHOWN:]
        start = tail.find("\n") + 1
        text = tail[start if 0 < start <= CUT_MARGIN else CUT_MARGIN :]
    return secrets.redact(text)


class _ReportFolder:
    """A fresh folder pytest writes its JUnit report into (PYTEST_ADDOPTS `--junitxml`): outside the
    worktree, so nothing the task left there can stand in for it, and made before the command starts,
    so a report is this run's or none."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="hub-pytest-"))
        self.path = self.folder / "report.xml"

    def addopts(self, env: dict[str, str] | None) -> str:
        before = (env or {}).get("PYTEST_ADDOPTS", "")
        return f"{before} --junitxml={self.path}".strip()

    def verdict(self) -> str | None:
        """None when the report shows at least one test run and none failed; else why not."""
        counts = _junit_counts(self.path)
        if counts is None:
            return (
                "no_tests_run: pytest exited 0 but wrote no report of its run (it ended early: "
                "os._exit, a crash, or no pytest ran); the command fails"
            )
        ran, failed = counts
        if failed:
            return f"tests_failed: pytest exited 0 but its report shows {failed} failed or erroring tests"
        if ran == 0:
            return "no_tests_run: pytest exited 0 but ran no test (none collected, or all skipped)"
        return None

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _junit_counts(path: Path) -> tuple[int, int] | None:
    """(tests run, failed or erroring) from a JUnit XML report, or None if there is none to read. The
    file was written by code the hub does not trust: capped, and refused with a DTD (entity bombs)."""
    import xml.etree.ElementTree as ElementTree

    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > REPORT_BYTES:
            return None
        data = path.read_bytes()
        if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
            return None
        root = ElementTree.fromstring(data)
    except (OSError, ElementTree.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if not suites:
        return None
    ran = failed = 0
    try:
        for suite in suites:
            tests, skipped = int(suite.get("tests", "0")), int(suite.get("skipped", "0"))
            bad = int(suite.get("failures", "0")) + int(suite.get("errors", "0"))
            ran += tests - skipped
            failed += bad
    except ValueError:
        return None
    return ran, failed


class _Tail:
    """Reads a stream to its end on a thread of its own, keeping only its last CAPTURE bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.kept = bytearray()
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read(65536):
                self.kept += chunk
                if len(self.kept) > 2 * CAPTURE:
                    del self.kept[:-CAPTURE]

    def text(self) -> str:
        # Unsandboxed, a child that left the process group may hold the pipe open past the kill: what
        # it wrote so far is the answer, and the hub does not wait for it.
        self.thread.join(timeout=5)
        return bytes(self.kept[-CAPTURE:]).decode("utf-8", errors="replace")


def jail_for(config: Config, work_root: Path | None = None) -> Jail:
    """The sandbox acceptance commands run in, for this configuration; logged, so the phase log says
    whether commands were sandboxed. Raises SandboxUnavailable under `sandbox: required`. `work_root`:
    the task's worktree, the one folder the commands may write (default: the repository)."""
    root = work_root or config.repo_root
    protected = [root / p for p in control_paths(config)]
    jail = prepare(config.sandbox, root, protected)
    jail = replace(jail, redactor=user_secrets(config, root))
    log.info("acceptance.sandbox", sandboxed=jail.sandboxed, mode=str(config.sandbox.mode), detail=jail.why)
    return jail


def _init_pid(info: bytes) -> int | None:
    """The sandbox's init (its host pid) from what bwrap wrote to --info-fd; None if it wrote none."""
    try:
        return int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None
