"""The `hub` command line as a real process: exit codes, one JSON document on stdout, messages on
stderr that name the file and the field, bad input that changes nothing, and eight phases started at
once of which exactly one runs."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.phases.context import Context
from hub.phases.table import BY_NAME, PROMOTE
from hub.state.handoff import phase_lock
from hub.testing import FakeOllama

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner, TaskDriver

Snapshot = Callable[[Path], dict[str, bytes]]


def branches(run_git: Any, repo: Path) -> dict[str, str]:
    out = run_git(repo, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines())


def test_help_lists_the_commands_and_exits_0(hub: HubRunner) -> None:
    done = hub("--help")
    assert done.returncode == 0
    for command in ("setup-task", "report-judge", "finalize-task", "resume", "next", "status", "log"):
        assert re.search(rf"^\s+{command}\s", done.stdout, re.MULTILINE), command


HEAVY_LIBRARIES = ("mcp", "git", "httpx", "tree_sitter", "tree_sitter_language_pack", "ast_grep_py")


def imported_packages(stderr: str) -> set[str]:
    """Top-level packages named in `-X importtime` lines (PYTHONPROFILEIMPORTTIME)."""
    return {
        line.split("|")[2].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_help_and_status_import_none_of_the_heavy_libraries(hub: HubRunner, task: TaskDriver) -> None:
    task.new()
    task.setup()
    for args in (("--help",), ("status",)):
        done = hub(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert done.returncode == 0, done.stderr
        imported = imported_packages(done.stderr)
        assert "hub" in imported, args  # the profile was read
        assert imported.isdisjoint(HEAVY_LIBRARIES), (args, imported & set(HEAVY_LIBRARIES))
        assert ("click" in imported) == (args == ("--help",))  # a plain status needs no click
        if args == ("status",):  # nor what a dataclass or a hash costs (issue 25: < 5x `python -c pass`)
            assert imported.isdisjoint({"dataclasses", "inspect", "hashlib"}), imported


def imported_modules(stderr: str) -> set[str]:
    """Every module named in `-X importtime` lines, dotted names whole."""
    return {
        line.split("|")[2].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def phase_modules() -> set[str]:
    from hub.phases.table import PHASES

    return {phase.target.partition(":")[0] for phase in PHASES}


def test_help_status_and_an_idle_next_import_no_phase_they_do_not_run(
    hub: HubRunner, task: TaskDriver
) -> None:
    # What the phase that an idle `hub next` runs (promoting the backlog) imports itself.
    promote = BY_NAME[PROMOTE].target.partition(":")[0]
    its_own = subprocess.run(
        [sys.executable, "-c", f"import sys, {promote}; print(*sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    done = hub("next", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr
    assert "nothing to do" in done.stdout
    assert imported_modules(done.stderr) & phase_modules() <= {promote, *its_own}
    task.new()
    task.setup()
    for args in (("--help",), ("status",)):
        done = hub(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert done.returncode == 0, done.stderr
        assert "hub.faces.entry" in imported_modules(done.stderr), args  # the profile was read
        assert imported_modules(done.stderr).isdisjoint(phase_modules()), args


def test_usage_errors_exit_2(hub: HubRunner) -> None:
    done = hub("resume")
    assert done.returncode == 2
    assert "Missing option '--to'" in done.stderr


def test_new_then_status_json_is_one_json_document_on_stdout(hub: HubRunner) -> None:
    created = hub(
        "new", "--title", "Greet politely", "--requirement", "say hello, NAME", "--target", "src/app.py"
    )
    assert created.returncode == 0, created.stderr
    done = hub("status", "--json")
    assert done.returncode == 0
    (doc,) = json.loads(done.stdout)["tasks"]
    assert re.fullmatch(r"demo-\d{10}-greet-politely", doc["task_id"])
    assert doc["status"] == "pending_implementer"
    assert doc["next"] == {"phase": "setup-task", "why": "the task has no branch yet"}
    assert doc["needs_person"] is None and doc["worktree"] is None
    again = hub("new", "--title", "Another", "--requirement", "r", "--target", "src/app.py")
    assert again.returncode == 0, again.stderr
    assert "created task demo-" in again.stdout and "-another" in again.stdout
    both = [t["task_id"] for t in json.loads(hub("status", "--json").stdout)["tasks"]]
    assert doc["task_id"] in both and len(both) == 2
    # Two tasks: a phase command without --task exits 2 naming both.
    ambiguous = hub("setup-task")
    assert ambiguous.returncode == 2
    assert "several tasks fit" in ambiguous.stderr and doc["task_id"] in ambiguous.stderr
    named = hub("setup-task", "--task", doc["task_id"])
    assert named.returncode == 0, named.stderr


def test_new_from_a_markdown_proposal(hub: HubRunner, git_repo: Path) -> None:
    proposal = git_repo.parent / "proposal.md"
    proposal.write_text(
        "# Add a farewell\n\nTarget: src/app.py\n\n## Requirements\n- bye()\n", encoding="utf-8"
    )
    done = hub("new", "--from-proposal", str(proposal), "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["task_id"].endswith("-add-a-farewell")
    path = git_repo / "_handoff" / "tasks" / outcome["task_id"] / "TASK_CONTRACT.json"
    contract = json.loads(path.read_text(encoding="utf-8"))
    assert contract["specification"]["requirements"] == ["bye()"]


def test_status_and_log_json_with_a_task_are_single_documents_and_logs_stay_off_stdout(
    hub: HubRunner, task: TaskDriver
) -> None:
    contract = task.to_review_complete("PASS")
    status = hub("status", "--json", env={"HUB_LOG_LEVEL": "DEBUG"})
    assert json.loads(status.stdout)["tasks"][0]["next"]["phase"] == "finalize-task"
    log = hub("log", "--json", env={"HUB_LOG_LEVEL": "DEBUG"})
    entries = json.loads(log.stdout)
    assert [e["event"] for e in entries] == [h["event"] for h in contract["history"]]
    text = hub("status")
    assert text.returncode == 0 and "next     hub finalize-task" in text.stdout


def test_a_phase_prints_its_outcome_and_logs_one_canonical_json_line_on_stderr(
    hub: HubRunner, task: TaskDriver
) -> None:
    task.to_judge_review()
    task.judge_report("PASS")
    done = hub("report-judge", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["to"] == "review_complete"
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    phase_lines = [line for line in lines if line["event"] == "phase"]
    assert len(phase_lines) == 1
    assert phase_lines[0]["phase"] == "report-judge"
    assert (phase_lines[0]["from"], phase_lines[0]["to"]) == ("pending_judge_review", "review_complete")


def test_next_exits_0_when_nothing_is_due_and_4_when_halted(hub: HubRunner, task: TaskDriver) -> None:
    task.to_judge_review()
    idle = hub("next")
    assert idle.returncode == 0
    assert idle.stdout.startswith("nothing to do: waiting for the judge")
    task.judge_report("CRITICAL_HALT")
    halted = hub("report-judge")
    assert halted.returncode == 4
    assert "halted (critical_halt)" in halted.stdout
    after = hub("next")
    assert after.returncode == 4
    assert "is halted" in after.stderr


def test_a_held_lock_makes_a_phase_exit_75_naming_the_holder(
    hub: HubRunner, task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("PASS")
    before = task.hand.contract.read_bytes()
    with phase_lock(ctx.handoff, "report-judge", ctx.clock()):
        done = hub("report-judge")
    assert done.returncode == 75
    assert f"another phase is running (report-judge, pid {os.getpid()}, since " in done.stderr
    assert task.hand.contract.read_bytes() == before


# --- bad input: exit 1 (or 3), the file and field named, nothing changed ----------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(contract: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = contract
        for key in parents:
            node = node[key]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value

    return mutate


def _both(contract: dict[str, Any]) -> None:
    contract["constraints"]["forbidden_paths"] = ["src/app.py"]


BAD_INPUT: list[tuple[str, Any, str, str, int]] = [
    # (name, how to break it, file, what stderr must name, exit code)
    ("malformed contract", "{ not json", "TASK_CONTRACT.json", "$: not valid JSON", 1),
    (
        "missing field",
        _set("limits.max_rebuttals", KeyError),
        "TASK_CONTRACT.json",
        "$.limits.max_rebuttals",
        1,
    ),
    ("wrong type", _set("limits.max_rebuttals", "two"), "TASK_CONTRACT.json", "$.limits.max_rebuttals", 1),
    ("unknown status", _set("status", "flying"), "TASK_CONTRACT.json", "$.status", 1),
    ("allowed and forbidden", _both, "TASK_CONTRACT.json", "$.constraints.forbidden_paths[0]", 1),
    ("unknown verdict", '{"verdict": "SHIP_IT"}', "JUDGE_REPORT.json", "$.verdict", 1),
    ("wrong state", _set("status", "pending_local_review"), "TASK_CONTRACT.json", "report-judge needs", 3),
]


def test_bad_input_exits_1_or_3_naming_file_and_field_and_changes_no_file_or_branch(
    task: TaskDriver, ctx: Context, git_repo: Path, run_git: Any, snapshot: Snapshot, tmp_path: Path
) -> None:
    task.to_judge_review()
    task.judge_report("PASS")
    prepared = ctx.handoff.dir
    task_dir = ctx.handoff.task_dir.relative_to(prepared)
    folders: dict[str, Path] = {}
    for name, breaker, file, _, _ in BAD_INPUT:
        folder = tmp_path / "handoffs" / name.replace(" ", "-")
        shutil.copytree(prepared, folder)
        target = folder / task_dir / file
        if isinstance(breaker, str):
            target.write_text(breaker, encoding="utf-8")
        else:
            contract = json.loads(target.read_text(encoding="utf-8"))
            breaker(contract)
            target.write_text(json.dumps(contract), encoding="utf-8")
        folders[name] = folder
    before = {name: snapshot(folder) for name, folder in folders.items()}
    refs_before = (branches(run_git, git_repo), run_git(git_repo, "rev-parse", "--abbrev-ref", "HEAD"))
    tree_before = run_git(git_repo, "status", "--porcelain")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    # One process per case, all at once: the cases are independent folders.
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "hub", "--handoff", str(folder), "report-judge"],
            cwd=git_repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, folder in folders.items()
    }
    for name, _, file, field, code in BAD_INPUT:
        out, err = procs[name].communicate(timeout=60)
        assert procs[name].returncode == code, (name, err)
        assert err.startswith("hub: "), (name, err)
        if code == 1:
            assert f"{folders[name] / task_dir / file}: {field}" in err, (name, err)
        else:
            assert field in err and "pending_local_review" in err, (name, err)
        assert out == "", name
        assert snapshot(folders[name]) == before[name], name
    assert (
        branches(run_git, git_repo),
        run_git(git_repo, "rev-parse", "--abbrev-ref", "HEAD"),
    ) == refs_before
    assert run_git(git_repo, "status", "--porcelain") == tree_before


# --- eight phases at once ---------------------------------------------------------------------------------

# Each child imports what a phase needs, says it is ready, and blocks on the release pipe; closing that
# pipe starts all of them in the same instant, a few milliseconds from the lock. GitPython is left out:
# setup-task imports it while holding the lock, which keeps the race window wide.
RACER = """
import os, sys
import filelock, structlog, yaml
import hub.core.config, hub.phases.judge, hub.phases.setup
from hub.faces.cli import main
os.write(int(sys.argv[1]), b"r")
os.read(0, 1)
main(sys.argv[2:])
"""


def race(repo: Path, args: list[str], n: int = 8, deadline: float = 60.0) -> list[tuple[int, int, str, str]]:
    """Start `n` `hub ARGS` processes at the same moment; (pid, exit code, stdout, stderr) for each."""
    release_read, release_write = os.pipe()
    ready_read, ready_write = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env["HUB_LOG_FORMAT"] = "json"
    procs = []
    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", RACER, str(ready_write), *args],
                    cwd=repo,
                    env=env,
                    stdin=release_read,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    pass_fds=(ready_write,),
                )
            )
        os.close(ready_write)
        ready_write = -1
        seen = 0
        while seen < n:
            ready, _, _ = select.select([ready_read], [], [], deadline)
            assert ready, f"only {seen} of {n} racers got ready"
            chunk = os.read(ready_read, n)
            assert chunk, "a racer died before the start"
            seen += len(chunk)
    finally:
        os.close(release_write)  # the starting gun: every racer's read returns at once
        os.close(release_read)
        os.close(ready_read)
        if ready_write >= 0:
            os.close(ready_write)
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=deadline)
        results.append((proc.pid, proc.returncode, out, err))
    return results


LOCK_MESSAGE = re.compile(r"hub: another phase is running \((\S+), pid (\d+), since (\S+Z)\); fix: try later")


def test_eight_setup_tasks_at_once_one_runs_and_seven_exit_75_naming_it(
    task: TaskDriver, ctx: Context, git_repo: Path, run_git: Any
) -> None:
    task_id = task.new()
    results = race(git_repo, ["setup-task"])
    winners = [r for r in results if r[1] == 0]
    losers = [r for r in results if r[1] != 0]
    assert len(winners) == 1, [(code, err) for _, code, _, err in results]
    winner_pid = winners[0][0]
    for _, code, out, err in losers:
        assert code == 75, err
        assert out == ""
        match = LOCK_MESSAGE.search(err)
        assert match, err
        assert (match.group(1), int(match.group(2))) == ("setup-task", winner_pid), err
    contract = task.contract()
    assert contract["git"]["task_branch"] == f"task/{task_id}"
    assert sorted(branches(run_git, git_repo)) == ["main", f"task/{task_id}"]
    assert run_git(git_repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert len(run_git(git_repo, "worktree", "list").splitlines()) == 2


def test_eight_report_judges_at_once_apply_the_verdict_exactly_once(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [{"description": "no comma"}])
    history_before = len(task.contract()["history"])
    results = race(ctx.repo_root, ["report-judge"])
    codes = sorted(code for _, code, _, _ in results)
    assert codes.count(0) == 1, [(code, err) for _, code, _, err in results]
    # The others either met the lock (75) or, arriving after the winner finished, a task no longer
    # waiting for a verdict (3); none applied it again.
    assert set(codes) <= {0, 3, 75}
    contract = task.contract()
    new_events = [h["event"] for h in contract["history"][history_before:]]
    assert new_events == ["review_started", "judge_complete", "fail_agree"]
    assert contract["attempt"] == 2
    lines = [
        line["event"]
        for line in task.hand.transitions.read_text().splitlines()
        for line in [json.loads(line)]
    ]
    assert lines[history_before:] == new_events


@pytest.mark.parametrize("command", ["status", "log"])
def test_read_only_commands_run_while_a_phase_holds_the_lock(
    command: str, hub: HubRunner, task: TaskDriver, ctx: Context
) -> None:
    task.new()
    with phase_lock(ctx.handoff, "setup-task", ctx.clock()):
        done = hub(command, "--json")
    assert done.returncode == 0
    json.loads(done.stdout)


def test_setup_task_on_a_dirty_checkout_runs_and_leaves_the_users_files_byte_for_byte(
    hub: Any, task: Any, git_repo: Path, run_git: Any
) -> None:
    task.new()
    (git_repo / "src/app.py").write_text("edited by hand\n", encoding="utf-8")
    (git_repo / "notes.txt").write_text("scratch\n", encoding="utf-8")
    done = hub("setup-task")
    assert done.returncode == 0, done.stderr
    assert (git_repo / "src/app.py").read_text(encoding="utf-8") == "edited by hand\n"
    assert (git_repo / "notes.txt").read_text(encoding="utf-8") == "scratch\n"
    assert run_git(git_repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert run_git(git_repo, "stash", "list") == ""


def test_next_waiting_for_a_judge_says_so_on_stderr_for_cron(hub: Any, task: Any) -> None:
    task.to_judge_review()  # no judge configured: nothing runs until someone writes a verdict
    done = hub("next")
    assert done.returncode == 0 and done.stdout.startswith("nothing to do: waiting for the judge")
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert line["event"] == "next.waiting" and line["state"] == "pending_judge_review"
    assert "JUDGE_REPORT.json" in line["why"]


def test_log_of_a_mistyped_task_id_says_nothing_was_logged_rather_than_printing_nothing(
    hub: HubRunner,
) -> None:
    assert hub("log").stdout == "nothing logged yet\n"
    done = hub("log", "--task", "nope")
    assert done.returncode == 0
    assert done.stdout == "nothing logged for task nope; `hub log` lists every task's transitions\n"
    assert json.loads(hub("log", "--task", "nope", "--json").stdout) == []


def test_no_command_of_a_whole_task_by_hand_imports_the_mcp_sdk(
    git_repo: Path, hub: HubRunner, run_git: Callable[..., str]
) -> None:
    """The default worker is the hub's own, in-process: the SDK is for `hub mcp serve` and workers over
    stdio, HTTP or SSE, and costs 0.6-1.9 s to import."""
    fixed = 'def greet(name):\n    return "hello, " + name\n'
    (git_repo / "hub.yaml").write_text(
        "project: demo\nroles:\n  implementer: {model: impl}\n  local_reviewer: {model: rev}\n",
        encoding="utf-8",
    )
    run_git(git_repo, "commit", "-qam", "configure the hub")
    replies = {
        "impl": lambda _body: f"src/app.py\n```python\n{fixed}```\n",
        "rev": lambda _body: '{"passed": true, "critical": false, "issues": []}',
    }
    commands = (
        ("new", "--title", "Greet", "--requirement", "say hello, NAME", "--target", "src/app.py"),
        ("setup-task",),
        ("run-implementer",),
        ("run-local-review",),
        ("report-judge",),
        ("finalize-task",),
        ("status",),
        ("log",),
        ("next",),
    )
    sdk: dict[str, set[str]] = {}
    rich: dict[str, set[str]] = {}
    with FakeOllama(replies) as fake:
        for args in commands:
            if args[0] == "report-judge":
                (folder,) = (git_repo / "_handoff" / "tasks").iterdir()
                verdict = {"verdict": "PASS", "summary": "ok", "blocking_issues": []}
                (folder / "JUDGE_REPORT.json").write_text(json.dumps(verdict), encoding="utf-8")
            done = hub(*args, env={"OLLAMA_HOST": fake.url, "PYTHONPROFILEIMPORTTIME": "1"})
            assert done.returncode == 0, (args, done.stderr[-2000:])
            imported = imported_packages(done.stderr)
            assert "hub" in imported, args  # the profile was read
            sdk[args[0]] = imported & {"mcp", "mcp_types"}
            # JSON logs need no rich (structlog's console tracebacks) and the hub never runs httpx's
            # command-line client (rich, pygments): ~65 ms of a model phase between them.
            # (A refused `import rich` still prints a profile line: its modules are what loading looks like.)
            modules = {
                line.split("|")[2].strip() for line in done.stderr.splitlines() if line.count("|") == 2
            }
            rich[args[0]] = {name for name in modules if name.startswith(("rich.", "pygments"))}
        assert len(fake.chat_requests("impl")) == 1 and len(fake.chat_requests("rev")) == 1

    assert sdk == {args[0]: set() for args in commands}
    assert rich == {args[0]: set() for args in commands}
    assert run_git(git_repo, "show", "main:src/app.py") + "\n" == fixed


def test_a_log_level_that_is_none_of_the_four_is_a_usage_error(hub: HubRunner) -> None:
    done = hub("--log-level", "verbose", "status")
    assert done.returncode == 2
    assert "'--log-level': 'verbose' is not one of 'debug', 'info', 'warning', 'error'" in done.stderr
    assert hub("--log-level", "debug", "status").returncode == 0


def test_status_warns_of_a_hub_variable_a_typo_away_from_one_it_reads(hub: HubRunner) -> None:
    done = hub("status", env={"HUB_IMPLEMENTOR_MODEL": "qwen2.5-coder:32b"})
    assert done.returncode == 0
    assert "agent-hub reads no HUB_IMPLEMENTOR_MODEL; did you mean HUB_IMPLEMENTER_MODEL?" in done.stderr


def test_status_inside_a_tasks_worktree_shows_the_task(hub: HubRunner, task: TaskDriver) -> None:
    task_id = task.new()
    worktree = Path(task.setup()["git"]["worktree"])
    (worktree / "src").mkdir(exist_ok=True)

    done = hub("status", "--json", cwd=worktree / "src")

    assert done.returncode == 0, done.stderr
    assert [t["task_id"] for t in json.loads(done.stdout)["tasks"]] == [task_id]


def test_a_yaml_syntax_error_names_hub_yaml_and_its_line(hub: HubRunner, git_repo: Path) -> None:
    (git_repo / "hub.yaml").write_text(
        "project: demo\nroles:\n  implementer: {model: x\nlimits: 3\n", "utf-8"
    )

    done = hub("status")

    assert done.returncode == 1
    assert f"{git_repo / 'hub.yaml'}:4: not valid YAML" in done.stderr
    assert 'in "hub.yaml", line 3' in done.stderr and "<unicode string>" not in done.stderr


def test_without_git_new_and_next_say_so_in_one_line_and_halt_no_task(
    hub: HubRunner, task: TaskDriver, tmp_path: Path
) -> None:
    # Issue 35: GitPython's 80-line ImportError; and a missing git is no task's failure to halt for.
    task.new()
    no_git = tmp_path / "bin-without-git"
    no_git.mkdir()
    for done in (
        hub("new", "--title", "t", "--requirement", "r", "--target", "src/app.py", env={"PATH": str(no_git)}),
        hub("next", env={"PATH": str(no_git)}),
    ):
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().splitlines() == [
            "hub: git is not installed: no `git` on PATH; fix: install git (e.g. `apt install git`), "
            "or put it on PATH"
        ]
    assert (
        task.contract()["status"] == "pending_implementer" and task.contract()["git"]["task_branch"] is None
    )
