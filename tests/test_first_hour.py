"""The first hour of a new user: the mistakes people make, through the real `hub` command line, each
answered with a message that says what and where, a documented exit code, and nothing changed.

A corpus of broken hub.yaml files and broken contracts goes through every command; none may end in a
traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import default_yaml

Snapshot = Callable[[Path], dict[str, bytes]]

# (name, hub.yaml text, what the message must say: "LINE: key.path: ...")
BROKEN_CONFIGS: list[tuple[str, str, str]] = [
    (
        "role for roles",
        "role:\n  implementer:\n    model: qwen2.5-coder:32b\n",
        "hub.yaml:1: role: unknown key; did you mean 'roles'?",
    ),
    (
        "num_ctc",
        "models:\n  qwen2.5-coder:7b:\n    num_ctc: 16384\n",
        "hub.yaml:3: models[\"qwen2.5-coder:7b\"].num_ctc: unknown key; did you mean 'num_ctx'?",
    ),
    (
        "a list for seconds",
        "project: p\nacceptance_timeout_seconds: [300]\n",
        "hub.yaml:2: acceptance_timeout_seconds: got a list [300] (expected a number > 0 (seconds))",
    ),
    (
        "workers as a mapping",
        "workers:\n  hub:\n    transport: stdio\n",
        "hub.yaml:1: workers: got a mapping",
    ),
    ("negative num_ctx", "default_num_ctx: -5\n", "hub.yaml:1: default_num_ctx: -5 is too small"),
    (
        "a boolean model",
        "roles:\n  judge:\n    model: yes\n",
        "hub.yaml:3: roles.judge.model: got a boolean True",
    ),
    (
        "unknown backend",
        "roles:\n  implementer: {backend: ollamma}\n",
        "roles.implementer.backend: 'ollamma' is not allowed; did you mean 'ollama'?",
    ),
    (
        "unknown worker",
        "roles:\n  implementer: {worker: hbu}\n",
        "hub.yaml:2: roles.implementer.worker: no worker server named 'hbu'; did you mean 'hub'?",
    ),
    (
        "stall as text",
        "roles:\n  local_reviewer:\n    timeouts: {stall: soon}\n",
        "hub.yaml:3: roles.local_reviewer.timeouts.stall: got a string 'soon'",
    ),
    (
        "halt file as a path",
        "halt_file: ../../etc/HALT.md\n",
        "hub.yaml:1: halt_file: '../../etc/HALT.md' is a path",
    ),
    ("http worker without url", "workers:\n  - {name: far, transport: http}\n", "workers[0].url: is missing"),
    ("not a mapping", "- roles\n", "hub.yaml:1: expected a mapping at the top level"),
    ("not YAML", "roles: [\n", "hub.yaml:2: not valid YAML"),
    (
        "roles twice",
        "roles:\n  implementer: {model: big:32b}\nproject: p\nroles:\n  judge: {model: j}\n",
        "hub.yaml:4: roles: duplicate key",
    ),
    ("tab indentation", "roles:\n\timplementer: {}\n", "hub.yaml:2: not valid YAML"),
    ("binary", "\udcff\udcfe", "hub.yaml: cannot be read"),
]

# Every command, with the arguments it needs to get as far as reading its input.
COMMANDS: list[list[str]] = [
    ["init"],
    ["new", "--title", "t", "--requirement", "r", "--target", "src/app.py"],
    ["setup-task"],
    ["run-implementer"],
    ["run-local-review"],
    ["report-judge"],
    ["run-judge"],
    ["timeout-judge"],
    ["rebut", "REBUTTAL"],
    ["finalize-task"],
    ["resume", "--to", "pending_implementer"],
    ["next"],
    ["status"],
    ["status", "--json"],
    ["log"],
    ["log", "--task", "t"],
    ["models"],
    ["doctor"],
    ["doctor", "--json"],
    ["mcp", "serve"],
    ["watch", "--poll"],
    ["backlog", "add", "# A proposal"],
    ["backlog", "update", "B1", "--priority", "1"],
    ["backlog", "list"],
    ["backlog", "next"],
    ["backlog", "summary", "s"],
    ["backlog", "complete"],
    ["note", "add", "n", "--type", "tip"],
    ["note", "list"],
    ["rules", "search", "eval"],
]


def write_config(repo: Path, text: str) -> None:
    if "\udcff" in text:
        (repo / "hub.yaml").write_bytes(text.encode("utf-8", "surrogateescape"))
    else:
        (repo / "hub.yaml").write_text(text, encoding="utf-8")


def state_of(repo: Path, yaml_cache: bool = True) -> dict[str, Any]:
    """The work tree's files, the branches and HEAD: what 'nothing changed' means. With `yaml_cache`,
    whether the hub cached hub.yaml too: a bad file never is; a good one is, once it has been still
    for 2 s (config.read_yaml), which a slow machine reaches within a test."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)"], cwd=repo, capture_output=True, text=True
    ).stdout
    head = (repo / ".git" / "HEAD").read_text(encoding="utf-8")
    state = {"files": files, "refs": refs, "head": head}
    if yaml_cache:
        state["cache"] = (repo / ".git" / "hub-yaml-cache.json").exists()
    return state


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`hub ARGV` through the same entry point as the console script; any uncaught exception (a
    traceback for the user) fails the test by propagating."""
    from hub.faces.entry import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), out, err


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """The in-process CLI points structlog and logging at pytest's captured stderr, which closes after
    the test: put back what was there so later tests do not log into a closed file."""
    import logging

    import structlog

    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith("HUB_") or key == "OLLAMA_HOST":
            monkeypatch.delenv(key)
    monkeypatch.setenv("HUB_LOG_FORMAT", "json")
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    yield


@pytest.mark.parametrize(("name", "text", "says"), BROKEN_CONFIGS, ids=[c[0] for c in BROKEN_CONFIGS])
def test_a_broken_hub_yaml_stops_every_command_naming_line_key_and_form_and_changes_nothing(
    git_repo: Path, capsys: pytest.CaptureFixture[str], quiet_env: None, name: str, text: str, says: str
) -> None:
    write_config(git_repo, text)
    (git_repo / "REBUTTAL").write_text("I disagree\n", encoding="utf-8")
    before = state_of(git_repo)
    for argv in COMMANDS:
        argv = [str(git_repo / a) if a == "REBUTTAL" else a for a in argv]
        code, out, err = run_in_process(["--repo", str(git_repo), *argv], capsys)
        where = f"hub {' '.join(argv)}"
        assert code == 1, (where, out, err)
        shown = out if argv[0] == "doctor" else err
        if argv == ["doctor", "--json"]:
            shown = json.loads(out)["checks"][0]["detail"]
        assert says in shown, (where, shown)
        if argv[0] != "doctor":
            assert err.startswith("hub: "), (where, err)
        assert state_of(git_repo) == before, where


def test_doctor_runs_the_same_validation_first_and_stops_there(hub: Any, git_repo: Path) -> None:
    write_config(git_repo, "role:\n  implementer:\n    model: qwen2.5-coder:32b\n")
    done = hub("doctor", "--json")
    assert done.returncode == 1
    checks = json.loads(done.stdout)["checks"]
    assert [c["name"] for c in checks] == ["hub.yaml"]
    assert "hub.yaml:1: role: unknown key; did you mean 'roles'?" in checks[0]["detail"]


def test_several_mistakes_are_reported_at_once_each_on_its_own_line(hub: Any, git_repo: Path) -> None:
    write_config(git_repo, "role: {}\nmodels:\n  m:\n    num_ctc: 1\nacceptance_timeout_seconds: [300]\n")
    done = hub("status")
    assert done.returncode == 1
    assert "3 problems" in done.stderr
    assert [line.split(": ", 2)[1] for line in done.stderr.splitlines()[1:]] == [
        "role",
        "models.m.num_ctc",
        "acceptance_timeout_seconds",
    ]
    assert "Traceback" not in done.stderr


# --- broken contracts through every command ---------------------------------------------------------

BROKEN_CONTRACTS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("not JSON", lambda c: "{ not json"),
    ("a list", lambda c: [c]),
    ("no status", lambda c: {k: v for k, v in c.items() if k != "status"}),
    ("git as a string", lambda c: {**c, "git": "main"}),
    ("attempt as text", lambda c: {**c, "attempt": "one"}),
    ("handoff_data null", lambda c: {**c, "handoff_data": None}),
    ("not UTF-8", lambda c: b'{"status": "\xff"}'),
]


@pytest.mark.parametrize(("name", "breaks"), BROKEN_CONTRACTS, ids=[c[0] for c in BROKEN_CONTRACTS])
def test_a_broken_contract_never_ends_in_a_traceback_and_changes_nothing(
    task: Any, git_repo: Path, capsys: pytest.CaptureFixture[str], quiet_env: None, name: str, breaks: Any
) -> None:
    task.new()
    contract_path = task.hand.contract
    broken = breaks(json.loads(contract_path.read_text(encoding="utf-8")))
    if isinstance(broken, bytes):
        contract_path.write_bytes(broken)
    else:
        contract_path.write_text(broken if isinstance(broken, str) else json.dumps(broken), encoding="utf-8")
    (git_repo / "REBUTTAL").write_text("I disagree\n", encoding="utf-8")
    capsys.readouterr()
    # hub.yaml as a slow machine sees it by now: still for over 2 s, so the first command caches it.
    old = time.time() - 60
    os.utime(git_repo / "hub.yaml", (old, old))
    before = state_of(git_repo, yaml_cache=False)
    for argv in COMMANDS:
        if argv[0] in ("mcp", "watch", "backlog", "note", "rules", "models", "doctor", "init", "log", "new"):
            continue  # they do not read the contract (`new` adds a task beside it), or serve until stopped
        argv = [str(git_repo / a) if a == "REBUTTAL" else a for a in argv]
        code, out, err = run_in_process(["--repo", str(git_repo), *argv], capsys)
        where = f"hub {' '.join(argv)}"
        if argv[0] == "status":
            # The task is shown damaged, naming its file, beside every other task (issue 35).
            assert code == 0 and "damaged" in out and "TASK_CONTRACT.json" in out, (where, out, err)
            assert state_of(git_repo, yaml_cache=False) == before, where
            continue
        assert code in (1, 3), (where, out, err)
        assert err.startswith("hub: "), (where, err)
        if argv[0] != "run-judge":  # which refuses first: no judge is configured
            assert "TASK_CONTRACT.json" in err, (where, err)
        assert state_of(git_repo, yaml_cache=False) == before, where


# --- before `hub init`, outside git -------------------------------------------------------------------


def test_outside_a_git_repository_new_says_so_exits_1_and_creates_nothing(hub: Any, tmp_path: Path) -> None:
    folder = tmp_path / "not-a-repo"
    folder.mkdir()
    done = hub("new", "--title", "t", "--requirement", "r", cwd=folder)
    assert done.returncode == 1
    assert done.stderr.startswith(f"hub: {folder} is not inside a git repository")
    assert "git init" in done.stderr
    assert list(folder.iterdir()) == []


def test_in_a_repository_without_hub_init_next_says_to_run_it_and_writes_nothing(
    hub: Any, tmp_path: Path, run_git: Any
) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n", encoding="utf-8")
    for argv in (
        ["next"],
        ["new", "--title", "t", "--requirement", "r"],
        ["status"],
        ["backlog", "add", "# P"],
    ):
        done = hub(*argv, cwd=repo)
        assert done.returncode == 1, argv
        assert f"no hub.yaml in {repo}: `hub init` has not run here; fix: hub init" in done.stderr, argv
        assert "commit" not in done.stderr, argv  # the old advice: commit _handoff/.hub.lock
        assert sorted(p.name for p in repo.iterdir()) == [".git", "a.py"], argv


def test_a_handoff_folder_git_does_not_ignore_is_refused_with_hub_init_as_the_fix(
    hub: Any, git_repo: Path
) -> None:
    (git_repo / ".git" / "info" / "exclude").write_text("", encoding="utf-8")
    done = hub("next")
    assert done.returncode == 1
    assert "_handoff/ is not ignored by git" in done.stderr and "fix: hub init" in done.stderr
    assert not (git_repo / "_handoff").exists()


def test_doctor_fails_outside_git_and_before_hub_init_with_the_fix(
    hub: Any, tmp_path: Path, run_git: Any
) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    done = hub("doctor", "--json", cwd=outside, env={"OLLAMA_HOST": "http://127.0.0.1:9"})
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert done.returncode == 1
    assert not checks["git repository"]["ok"] and "git init" in checks["git repository"]["fix"]

    repo = tmp_path / "repo-without-init"
    repo.mkdir()
    run_git(repo, "init", "-q")
    done = hub("doctor", "--json", cwd=repo, env={"OLLAMA_HOST": "http://127.0.0.1:9"})
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert done.returncode == 1
    assert not checks["hub init"]["ok"] and checks["hub init"]["fix"] == "hub init"
    assert sorted(p.name for p in repo.iterdir()) == [".git"]


def test_init_then_the_same_commands_work(hub: Any, tmp_path: Path, run_git: Any) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    assert hub("init", cwd=repo).returncode == 0
    done = hub("status", cwd=repo)
    assert done.returncode == 0 and "no active task" in done.stdout


def test_the_default_hub_yaml_passes_its_own_schema(tmp_path: Path) -> None:
    from hub.core.config import load_config

    (tmp_path / "hub.yaml").write_text(default_yaml("p"), encoding="utf-8")
    assert load_config(tmp_path, env={}).project == "p"


def test_every_key_the_readme_shows_is_in_the_schema() -> None:
    import yaml

    from hub.core import config_schema

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Configuration: `hub.yaml`", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert config_schema.validate(yaml.safe_load(block)) == []


def test_a_config_corpus_through_the_real_cli_as_separate_processes(
    hub: Any, git_repo: Path, tmp_path: Path
) -> None:
    # The in-process corpus above uses the console script's entry point; here the same files, each in a
    # copy of the repository, go through real `hub status` and `hub next` processes started at once.
    procs = {}
    for name, text, says in BROKEN_CONFIGS:
        repo = tmp_path / "corpus" / name.replace(" ", "-")
        shutil.copytree(git_repo, repo)
        write_config(repo, text)
        for argv in (["status"], ["next"]):
            env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
            procs[(name, argv[0])] = (
                subprocess.Popen(
                    [sys.executable, "-m", "hub", *argv],
                    cwd=repo,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
                says,
            )
    for key, (proc, says) in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (key, err)
        assert says in err and "Traceback" not in err, (key, err)
        assert out == "", key


# --- hub new: a mistyped --target, no target at all ----------------------------------------------------


def test_a_mistyped_target_is_refused_naming_the_file_meant_and_nothing_is_written(
    hub: Any, git_repo: Path
) -> None:
    done = hub("new", "--title", "Greet", "--requirement", "r", "--target", "src/ap.py")
    assert done.returncode == 1
    assert done.stderr.startswith("hub: --target src/ap.py: no such file in ")
    assert "did you mean src/app.py?" in done.stderr and "--new-file" in done.stderr
    assert not list((git_repo / "_handoff").glob("**/TASK_CONTRACT.json"))


def test_a_mistyped_source_is_refused_like_a_target_and_nothing_is_written(hub: Any, git_repo: Path) -> None:
    done = hub(
        "new", "--title", "Greet", "--requirement", "r", "--target", "src/app.py", "--source", "src/ap.py"
    )
    assert done.returncode == 1
    assert done.stderr.startswith("hub: --source src/ap.py: no such file in ")
    assert "did you mean src/app.py?" in done.stderr
    assert not (git_repo / "_handoff" / "TASK_CONTRACT.json").exists()
    # The file a task creates may also be given as a source: it is the target, not a typo.
    new = hub(
        "new",
        "--title",
        "Add",
        "--requirement",
        "r",
        "--target",
        "src/u.py",
        "--new-file",
        "--source",
        "src/u.py",
    )
    assert new.returncode == 0, new.stderr


def test_a_target_or_source_outside_the_repository_is_refused_even_as_a_new_file(
    hub: Any, git_repo: Path
) -> None:
    outside = hub("new", "--title", "t", "--requirement", "r", "--target", "../evil.py", "--new-file")
    read = hub(
        "new", "--title", "t", "--requirement", "r", "--target", "src/app.py", "--source", "/etc/hostname"
    )
    assert (outside.returncode, read.returncode) == (1, 1)
    assert outside.stderr == "hub: --target ../evil.py: is not inside the repository ('..')\n"
    assert read.stderr.startswith("hub: --source /etc/hostname: is not inside the repository ")
    assert not (git_repo / "_handoff" / "TASK_CONTRACT.json").exists()


@pytest.mark.parametrize(
    "argv",
    [["new", "--from-proposal", "p.md"], ["rebut", "p.md"], ["backlog", "add", "--file", "p.md"]],
)
def test_a_file_named_on_the_command_line_that_is_not_utf8_is_refused_naming_it(
    hub: Any, git_repo: Path, snapshot: Snapshot, argv: list[str]
) -> None:
    (git_repo / "p.md").write_bytes(b"# Greet\xff\n\n## Requirements\n\n- r\n\nTarget: src/app.py\n")
    before = snapshot(git_repo)
    done = hub(*argv)
    assert done.returncode == 1, done.stderr
    assert done.stderr == "hub: p.md: $: not UTF-8 text (byte 7)\n"
    assert snapshot(git_repo) == before


def test_a_new_file_target_is_accepted_with_new_file(hub: Any, git_repo: Path) -> None:
    done = hub("new", "--title", "Add util", "--requirement", "r", "--target", "src/util.py", "--new-file")
    assert done.returncode == 0, done.stderr
    (path,) = (git_repo / "_handoff" / "tasks").glob("*/TASK_CONTRACT.json")
    contract = json.loads(path.read_text(encoding="utf-8"))
    assert contract["constraints"]["allowed_paths"] == ["src/util.py"]


def test_a_task_with_no_file_to_change_is_created_for_the_hub_to_find_its_files(
    hub: Any, git_repo: Path
) -> None:
    done = hub("new", "--title", "Greet", "--requirement", "r")
    assert done.returncode == 0, done.stderr
    (path,) = (git_repo / "_handoff" / "tasks").glob("*/TASK_CONTRACT.json")
    contract = json.loads(path.read_text(encoding="utf-8"))
    assert contract["specification"]["find_files"] is True and contract["constraints"]["allowed_paths"] == []


# --- the halt file's resume command --------------------------------------------------------------------


def test_the_halt_files_command_as_written_is_refused_and_one_leading_nowhere_too_changing_nothing(
    hub: Any, task: Any
) -> None:
    import shlex

    from hub.state.breakers import Trip

    task.new()
    task.setup()
    task.run().halt(Trip("critical_flaw", "the reviewer found eval() on user input"))
    halt = task.hand.halt_report.read_text(encoding="utf-8")
    line = next(line.strip() for line in halt.splitlines() if "resume --to" in line)
    before = (task.hand.contract.read_bytes(), halt)

    as_written = hub(*shlex.split(line.split("&&", 1)[1])[1:])
    assert as_written.returncode == 1
    assert "still holds the halt file's placeholder" in as_written.stderr
    nowhere = hub("resume", "--to", "review_complete")
    assert nowhere.returncode == 3
    assert "to review_complete would lead nowhere" in nowhere.stderr
    assert "pending_implementer: the implementer writes the change again" in nowhere.stderr
    assert (task.hand.contract.read_bytes(), task.hand.halt_report.read_text(encoding="utf-8")) == before

    done = hub("resume", "--to", "pending_implementer", "--note", "never build code from input")
    assert done.returncode == 0, done.stderr
    assert task.contract()["handoff_data"]["resume_notes"] == ["never build code from input"]


def test_new_in_a_repository_without_a_commit_says_commit_first_exits_1_and_writes_no_task(
    hub: Any, tmp_path: Path, run_git: Any
) -> None:
    repo = tmp_path / "unborn"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n", encoding="utf-8")
    assert hub("init", cwd=repo).returncode == 0
    before = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts)

    done = hub("new", "--title", "t", "--requirement", "r", "--target", "a.py", cwd=repo)

    assert done.returncode == 1
    assert done.stderr.startswith(
        f"hub: the repository {repo} has no commit yet; fix: commit your files first"
    )
    assert "git commit" in done.stderr and "Traceback" not in done.stderr
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts) == before


def test_setup_task_from_a_base_branch_that_does_not_exist_names_the_branches_and_changes_nothing(
    hub: Any, git_repo: Path
) -> None:
    assert hub("new", "--title", "t", "--requirement", "r", "--target", "src/app.py").returncode == 0
    (contract,) = (git_repo / "_handoff").glob("tasks/*/TASK_CONTRACT.json")
    before = contract.read_bytes()

    done = hub("setup-task", "--base", "mian")

    assert done.returncode == 1
    assert done.stderr.startswith(
        f"hub: base branch 'mian' does not exist in {git_repo} (its branches: main)"
    )
    assert "pass --base with one of them" in done.stderr and "Traceback" not in done.stderr
    assert contract.read_bytes() == before
    assert not (git_repo / ".git" / "hub-worktrees").exists()


def test_the_readmes_walk_through_reaches_the_merge_with_the_stand_in_model(
    tmp_path: Path, run_git: Any
) -> None:
    """README's "Using it on your repository", command by command, on a repository of the user's own,
    answered by `hub-standin` with README's own script: no GPU, no model server, a merge at the end."""
    import re
    import shlex

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    walk = readme.split("    cd your-repo", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    commands = [shlex.split(line, comments=True) for line in walk.replace("\\\n", " ").splitlines()]
    commands = [c for c in commands if c]
    assert [c[:2] for c in commands][:3] == [["hub", "init"], ["hub", "new"], ["hub", "next"]]
    (script,) = re.findall(r"^````yaml\n(# standin\.yaml.*?)^````$", readme, re.S | re.M)
    (tmp_path / "standin.yaml").write_text(script, encoding="utf-8")
    repo = tmp_path / "your-repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "config", "user.email", "you@example.invalid")
    run_git(repo, "config", "user.name", "You")
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    tests = "from calc import add, sub\n\n\ndef test_it():\n    assert (add(1, 2), sub(3, 1)) == (3, 2)\n"
    (repo / "test_calc.py").write_text(tests, encoding="utf-8")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "calc")
    standin = subprocess.Popen(
        [sys.executable, "-m", "hub.testing", "--script", str(tmp_path / "standin.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert standin.stdout is not None
        listening = standin.stdout.readline()  # the first line, once it serves (bounded by the port bind)
        assert "FakeOllama listening on " in listening, listening
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "OLLAMA_"))}
        # `python` as the user's shell finds it: one with pytest, for the acceptance command.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["OLLAMA_HOST"] = listening.split("listening on ", 1)[1].strip()
        for command in commands:
            if command[:2] == ["hub", "report-judge"]:
                (task_dir,) = (repo / "_handoff" / "tasks").iterdir()
                verdict = {"verdict": "PASS", "blocking_issues": []}
                (task_dir / "JUDGE_REPORT.json").write_text(json.dumps(verdict), encoding="utf-8")
            done = subprocess.run(
                [sys.executable, "-m", "hub", *command[1:]],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, (command, done.stdout, done.stderr[-3000:])
    finally:
        standin.terminate()
        standin.communicate(timeout=30)
    assert run_git(repo, "show", "main:calc.py").endswith("def sub(a, b):\n    return a - b")
    assert "Merge task/" in run_git(repo, "log", "-1", "--format=%s")
