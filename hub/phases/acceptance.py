"""Running the contract's acceptance commands: in the sandbox (`hub.safety.sandbox`), each in its own process
group, with a timeout that kills the whole tree, within `sandbox.limits` (`hub.safety.limits`; memory and
processes bounded by the kernel where a cgroup v2 is delegated, `hub.safety.cgroup`).

What a command prints is kept to its tail and passed through the secret redactor (`hub.core.redaction`)
before anything else sees it: it goes into prompts, records, halts and REVIEW_REQUEST.md.
A command that runs pytest must also leave pytest's own report of the run (issue 28: code calling
`os._exit(0)` at import, or a conftest.py emptying the collection, made pytest exit 0): at least one test
run and none failed, else the command fails with that reason though it exited 0. The report comes back
through a pipe the command inherits (`--junitxml=/dev/fd/N`), never a file: no path of the hub's is in
the command's view or environment, nothing the code wrote before can stand in for it, and every pytest
the command starts (behind `make test` or tox too) reports into it (issue 38). `python -m unittest`
passes only with its own closing summary (`Ran N tests` ... `OK`); a command whose pass no runner
reported says so in its output. What the code under test can still do in pytest's own process (write
the pipe, then `os._exit(0)`) the static gate halts on (rules/py-os-exit.yml, py-test-report.yml).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from hub.state.contract import AcceptanceResult

from hub.core.config import Config
from hub.core.faults import crash_point
from hub.core.files import read_text_capped
from hub.core.log import get_logger
from hub.core.redaction import Redactor, redactor, user_secrets
from hub.repo.child import PIPE, Child
from hub.safety.cgroup import CommandGroup, command_group
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
MAKEFILE_CHARS = 256 * 1024


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
    sandboxed = jail is not None and jail.sandboxed
    if jail is not None and sandboxed and jail.git_objects is not None:
        jail.git_objects()  # before any descriptor is opened for the command: none to close if it fails
    report = _ReportPipe()
    group = command_group(jail.cgroup, jail.limits) if jail and sandboxed and jail.cgroup else None
    try:
        result = _run(command, cwd, timeout, jail, pidfile, report, crash_at, group)
        if result.ok:
            result = _verdict(command, result, report.documents(), _runs_pytest(command, cwd))
    finally:
        report.close()
        if group is not None:
            group.remove()
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
    report: _ReportPipe,
    crash_at: str,
    group: CommandGroup | None = None,
) -> CommandResult:
    sandboxed = jail is not None and jail.sandboxed
    # bwrap writes to --info-fd once the sandbox stands (its die-with-parent armed) and closes it: until
    # then a kill of the hub could leave a sandbox starting up without a parent to die with.
    were_absent = absent(jail.guarded) if jail else []
    env = dict(jail.env) if jail else None
    argv: list[str] | str = command
    args_fd = -1
    info_read, info_write = os.pipe() if sandboxed else (-1, -1)
    try:
        if jail and sandboxed:
            # bwrap's options through a memfd, so that no host path shows in the sandbox's /proc/1/cmdline.
            args_fd = os.memfd_create("bwrap-args", 0)
            os.write(args_fd, jail.options())
            os.lseek(args_fd, 0, os.SEEK_SET)
            argv = jail.argv(command, cwd, info_fd=info_write, args_fd=args_fd)
            if group is not None:
                argv = group.wrap(argv)
        elif jail:
            argv = jail.argv(command, cwd)
        env = {**(env if env is not None else os.environ), "PYTEST_ADDOPTS": report.addopts(env)}
        child = Child(
            argv,
            shell=jail is None,
            env=env,
            cwd=cwd,
            stdout=PIPE,
            stderr=PIPE,
            pass_fds=((info_write, args_fd) if sandboxed else ()) + (report.write_fd,),
            preexec_fn=jail.preexec if jail and sandboxed else None,
        )
    except BaseException:
        if sandboxed:
            os.close(info_read)
        raise
    finally:
        for fd in (info_write, args_fd):
            if fd >= 0:
                os.close(fd)
        # Only the command holds the pipe's writing end now: its end is the report's.
        report.started()
    with child:
        watch = None
        init = None
        if sandboxed:
            assert jail is not None
            with os.fdopen(info_read, "rb") as info:
                init = _init_pid(info.read())
            if init is not None:
                child.remember(pidfile, init, group=False)
                # With a cgroup the kernel bounds memory and threads: the watch counts processes there.
                watch = Watch(jail.limits, init, cwd.resolve(), child.end, group.path if group else None)
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
    if group is not None:
        group.refused(exit_code, started=init is not None)
    stopped = group.stopped() if group is not None else None
    if watch is not None and (watch.exceeded or stopped or exit_code in XFSZ_EXITS):
        assert jail is not None
        past = watch.exceeded or stopped or f"a file of {jail.limits.disk_mb} MiB (sandbox.limits.disk_mb)"
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


# What `python -m unittest` prints last: `Ran 3 tests in 0.001s`, a blank line, then `OK` (or `OK (skipped=1)`).
UNITTEST = re.compile(r"(?<![\w./-])unittest(?![\w-])")
UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\nOK\b", re.MULTILINE)
# A command that runs tests through something else (`make test`, tox, `npm test`, a script): when no
# report came back its pass rests on its exit code alone, and it says so.
TEST_RUN = re.compile(r"(?<![\w-])(tests?|check|make|tox|nox)(?![\w-])")
NO_REPORT = "hub: no test runner reported on this run (no pytest report, no unittest summary): the pass rests on the exit code alone"


def _runs_pytest(command: str, cwd: Path) -> bool:
    """Whether the command runs pytest: by name, or through `make` or tox whose file names it (the
    Makefile and tox.ini are acceptance files: the task cannot change them unnamed)."""
    if PYTEST.search(command):
        return True
    for runner, name in (("make", "Makefile"), ("tox", "tox.ini")):
        if re.search(rf"(?<![\w./-]){runner}(?![\w-])", command):
            text = read_text_capped(cwd / name, MAKEFILE_CHARS)
            if text is not None and PYTEST.search(text):
                return True
    return False


def _verdict(
    command: str, result: CommandResult, documents: list[bytes] | None, pytest: bool
) -> CommandResult:
    """The command's result once the runners' own reports are read: failed with the reason when a pytest
    report shows failures or no test run (or none came from a command naming pytest), or a unittest run
    lacks its closing `OK`; marked when nothing reported at all."""
    failure = None
    if documents:
        failure = _pytest_verdict(documents)
    elif pytest:
        failure = (
            "no_tests_run: pytest exited 0 but wrote no report of its run (it ended early: os._exit, a crash, "
            "or no pytest ran); the command fails"
        )
    if failure is None and UNITTEST.search(command):
        ran = [int(n) for n in UNITTEST_RAN.findall(result.stderr + "\n" + result.stdout)]
        if not ran or not sum(ran):
            failure = (
                "no_tests_run: unittest exited 0 but never printed its closing summary with tests run and OK "
                "(it ended early: os._exit, a crash, or no test ran); the command fails"
            )
        return replace(result, failure=failure)
    if failure is None and documents is None and TEST_RUN.search(command):
        return replace(result, stderr=result.stderr + "\n" + NO_REPORT)
    return replace(result, failure=failure)


def _pytest_verdict(documents: list[bytes]) -> str | None:
    ran = failed = 0
    for data in documents:
        counts = _junit_counts(data)
        if counts is None:
            return "no_tests_run: the pytest report that came back cannot be read; the command fails"
        ran, failed = ran + counts[0], failed + counts[1]
    if failed:
        return f"tests_failed: pytest exited 0 but its report shows {failed} failed or erroring tests"
    if ran == 0:
        return "no_tests_run: pytest exited 0 but ran no test (none collected, or all skipped)"
    return None


class _ReportPipe:
    """The pipe pytest writes its JUnit report into (PYTEST_ADDOPTS `--junitxml=/dev/fd/N`). Only the
    command's processes hold its writing end, there is no file for anything to plant, and it is read
    while the command runs (a report is larger than a pipe holds) up to REPORT_BYTES."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.kept = bytearray()
        self.over = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def addopts(self, env: Mapping[str, str] | None) -> str:
        before = (env or {}).get("PYTEST_ADDOPTS", "")
        return f"{before} --junitxml=/dev/fd/{self.write_fd}".strip()

    def started(self) -> None:
        """The hub's copy of the writing end closed, once: a second close of the same number would close
        whatever another thread (a concurrent task) has opened under it since (EBADF there)."""
        fd, self.write_fd = self.write_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _drain(self) -> None:
        with os.fdopen(self.read_fd, "rb") as stream:
            while chunk := stream.read(65536):
                if len(self.kept) + len(chunk) > REPORT_BYTES:
                    self.over = True
                    continue
                self.kept += chunk

    def documents(self) -> list[bytes] | None:
        """Each report pytest wrote (one per pytest the command ran), or None when none came back."""
        self.thread.join(timeout=5)
        if self.thread.is_alive() or self.over or not self.kept.strip():
            return None
        parts = re.split(rb"(?=<\?xml )", bytes(self.kept))
        return [p for p in parts if p.strip()]

    def close(self) -> None:
        self.started()


def _junit_counts(data: bytes) -> tuple[int, int] | None:
    """(tests run, failed or erroring) from a JUnit XML report, or None if it cannot be read. It was
    written by code the hub does not trust: refused with a DTD (entity bombs)."""
    import xml.etree.ElementTree as ElementTree

    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        return None
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
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
