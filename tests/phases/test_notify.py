"""hub.yaml `notify:` (issue 37): a merge, a halt, a review waiting for a person and a drained backlog each
reach the configured command (the event as JSON on stdin) or apprise URL once, redacted, sent by a
detached process that a hanging or failing notifier never lets hold up a phase.

The command target is a real process that hands what it read to the test over a loopback socket (the
`Inbox`), so every wait here is bounded by a socket timeout, never a sleep."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.config import CONFIG_FILE, default_yaml, load_config
from hub.core.errors import ConfigError
from hub.phases.context import Context
from hub.phases.finalize import finalize_task
from hub.state.breakers import Trip
from hub.state.triggers import Trigger

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner, TaskDriver

WAIT_SECONDS = 60  # a bound on each wait for a notifier, under load; never reached when all is well

NOTIFIER = """\
import json, os, socket, sys
port, mode = int(sys.argv[1]), sys.argv[2]
data = sys.stdin.buffer.read().decode("utf-8")
with socket.create_connection(("127.0.0.1", port)) as conn:
    conn.sendall(json.dumps({"pid": os.getpid(), "stdin": data}).encode("utf-8"))
    conn.shutdown(socket.SHUT_WR)
    if mode == "hang":
        conn.recv(1)  # until the test closes the connection
sys.exit(1 if mode == "fail" else 0)
"""


class Inbox:
    """A loopback socket the notifier command connects to and sends what it read on stdin."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(WAIT_SECONDS)
        self.port = self.server.getsockname()[1]

    def take(self) -> tuple[socket.socket, int, dict[str, Any]]:
        """The next notifier's connection (still open), its pid and the JSON it read on stdin."""
        conn, _ = self.server.accept()
        conn.settimeout(WAIT_SECONDS)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        sent = json.loads(data)
        return conn, sent["pid"], json.loads(sent["stdin"])

    def event(self) -> dict[str, Any]:
        conn, _, event = self.take()
        conn.close()
        return event


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    box = Inbox()
    yield box
    box.server.close()


def notify_yaml(inbox: Inbox, folder: Path, mode: str = "ok", extra: str = "") -> str:
    script = folder / "notifier.py"
    script.write_text(NOTIFIER, encoding="utf-8")
    command = json.dumps([sys.executable, str(script), str(inbox.port), mode])
    return f"\nnotify:\n  command: {command}\n{extra}"


def configure(repo: Path, yaml: str, run_git: Any) -> None:
    (repo / CONFIG_FILE).write_text(default_yaml("demo") + yaml, encoding="utf-8")
    run_git(repo, "commit", "-qam", "notify")


@pytest.fixture
def ctx(git_repo: Path, clock: Any, inbox: Inbox, fast_tmp: Path, run_git: Any) -> Context:
    """The phase context of tests/conftest.py, with a notifier command configured."""
    configure(git_repo, notify_yaml(inbox, fast_tmp), run_git)
    return Context(load_config(git_repo, env={}), clock=clock)


def test_a_merge_sends_the_event_as_json_to_the_command_and_then_the_drained_backlog(
    task: TaskDriver, ctx: Context, inbox: Inbox
) -> None:
    task.to_review_complete("PASS")  # the review waited for a person's verdict: one event
    outcome = finalize_task(ctx)
    events = {e["kind"]: e for e in (inbox.event(), inbox.event(), inbox.event())}
    assert set(events) == {"verdict_wanted", "merged", "drained"}
    merged = events["merged"]
    assert merged["task_id"] == outcome.task_id
    assert merged["next"] == f"nothing: see the merge with `git show {outcome.data['merge_commit'][:12]}`"
    assert "merged into main" in merged["what"]
    assert events["drained"]["task_id"] is None
    assert "hub backlog add" in events["drained"]["next"]


def test_a_halt_sends_the_halt_files_resume_command_and_never_a_secret(
    task: TaskDriver, ctx: Context, inbox: Inbox, git_repo: Path
) -> None:
    planted = "Zq8vK2mWp4Rt7YxN3bLc"  # a value of the user's .env, printed by a command
    (git_repo / ".env").write_text(f"DEPLOY_PASSWORD={planted}\n", encoding="utf-8")
    task.new()
    task.setup()
    reason = f"the acceptance command printed {planted} and sk-live0123456789abcdefghij"
    outcome = task.run().halt(Trip(Trigger.GIT_ERROR, reason, {}))
    event = inbox.event()
    assert (event["kind"], event["task_id"], event["state"]) == (
        "halted",
        outcome.task_id,
        "erik_consultation",
    )
    halt_file = ctx.handoff.halt_report.read_text(encoding="utf-8")
    resume_line = event["next"].split("then: ", 1)[1]
    assert resume_line.startswith("cd ") and "hub resume --to" in resume_line
    assert resume_line in halt_file  # the same first command ERIK_HALT.md gives
    sent = json.dumps(event)
    assert planted not in sent and "sk-live0123456789" not in sent
    assert "[REDACTED" in event["what"]


def test_hub_next_sends_an_event_a_killed_run_left_unsent_and_never_again(
    task: TaskDriver, ctx: Context, inbox: Inbox, hub: HubRunner
) -> None:
    task.new()
    task.setup()
    # Recorded without the phase's `Run.record`: as a run killed between saving and sending leaves it.
    task.record("circuit_breaker_halt")
    debug = {"HUB_LOG_LEVEL": "DEBUG"}
    first = hub("next", env=debug)
    assert first.returncode == 4, first.stderr
    assert first.stderr.count("notify.started") == 1
    assert inbox.event()["kind"] == "halted"
    for _ in range(2):
        again = hub("next", env=debug)
        assert again.returncode == 4
        assert "notify.started" not in again.stderr


def test_a_review_waiting_for_a_person_is_sent_once_with_the_verdict_to_give(
    task: TaskDriver, ctx: Context, inbox: Inbox, hub: HubRunner
) -> None:
    task.to_judge_review()
    event = inbox.event()
    assert event["kind"] == "verdict_wanted"
    assert str(ctx.handoff.review_request) in event["next"]
    assert '{"verdict": "PASS"}' in event["next"]
    assert f"hub report-judge --task {event['task_id']}" in event["next"]
    again = hub("next", env={"HUB_LOG_LEVEL": "DEBUG"})
    assert again.returncode == 0, again.stderr
    assert "notify.started" not in again.stderr


def test_a_hanging_notifier_does_not_hold_the_phase_or_the_hubs_exit(
    task: TaskDriver, inbox: Inbox, hub: HubRunner, git_repo: Path, fast_tmp: Path, run_git: Any
) -> None:
    configure(git_repo, notify_yaml(inbox, fast_tmp, "hang", "  events: [merged]\n  timeout: 300\n"), run_git)
    type(task)(Context(load_config(git_repo, env={}))).to_review_complete("PASS")
    done = hub("finalize-task")  # waits for its stdout and stderr to close, as cron does
    assert done.returncode == 0, done.stderr
    conn, pid, event = inbox.take()  # the notifier, started by the phase that has returned, still runs:
    with conn:
        assert event["kind"] == "merged"
        os.kill(pid, 0)  # alive: it waits on the test, which has not closed the connection
    log = (git_repo / "_handoff" / "notify.log").read_text(encoding="utf-8")
    assert "Traceback" not in log


def test_a_failing_notifier_is_retried_once_and_each_try_logged(
    inbox: Inbox, fast_tmp: Path, git_repo: Path
) -> None:
    script = fast_tmp / "notifier.py"
    script.write_text(NOTIFIER, encoding="utf-8")
    job = job_for([sys.executable, str(script), str(inbox.port), "fail"], [], git_repo)
    sent: list[dict[str, Any]] = []
    taker = threading.Thread(target=lambda: sent.extend(inbox.event() for _ in range(2)))
    taker.start()
    exit_code, lines = notify_send(job, fast_tmp)
    taker.join(WAIT_SECONDS)
    assert [e["id"] for e in sent] == ["merged-9", "merged-9"]  # tried, and tried once more
    assert exit_code == 1
    tries = [(line["event"], line.get("attempt")) for line in lines]
    assert tries == [("notify.failed", 1), ("notify.failed", 2), ("notify.gave_up", None)]
    assert lines[0]["detail"] == "exit 1"


def test_a_notifier_that_cannot_start_is_logged_and_tried_once_more(fast_tmp: Path, git_repo: Path) -> None:
    exit_code, lines = notify_send(job_for([str(fast_tmp / "no-such-notifier")], [], git_repo), fast_tmp)
    assert exit_code == 1
    assert [(line["event"], line.get("attempt")) for line in lines] == [
        ("notify.failed", 1),
        ("notify.failed", 2),
        ("notify.gave_up", None),
    ]
    assert lines[0]["detail"].startswith("could not start ")


def job_for(command: list[str], urls: list[str], repo: Path) -> dict[str, Any]:
    event = {
        "kind": "merged",
        "id": "merged-9",
        "task_id": "T1",
        "title": "Greet politely",
        "what": "task T1 merged into main (0123456789ab)",
        "next": "nothing: see the merge with `git show 0123456789ab`",
        "state": "merged",
        "at": "2026-11-26T21:00:00Z",
        "handoff": str(repo / "_handoff"),
    }
    return {"event": event, "urls": urls, "command": command, "timeout": 30, "repo_root": str(repo)}


class Receiver(BaseHTTPRequestHandler):
    """A loopback endpoint for apprise's `json://` target: keeps each body, answers `status`."""

    bodies: list[dict[str, Any]]
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def notify_send(job: dict[str, Any], home: Path) -> tuple[int, list[dict[str, Any]]]:
    """`hub notify-send` (what a transition starts detached) run to its end: its exit code and log lines."""
    done = subprocess.run(
        [sys.executable, "-m", "hub", "notify-send"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 2,
        env={"PATH": "/usr/bin:/bin", "HUB_LOG_FORMAT": "json", "HOME": str(home)},
        check=False,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    return done.returncode, [line for line in lines if str(line.get("event")).startswith("notify.")]


@pytest.mark.parametrize(
    ("status", "code", "tries"), [(200, 0, ["notify.sent"]), (500, 1, ["notify.failed"] * 2)]
)
def test_an_apprise_url_gets_what_happened_and_what_to_do_next_retried_once_on_failure(
    git_repo: Path, fast_tmp: Path, status: int, code: int, tries: list[str]
) -> None:
    handler = type("Handler", (Receiver,), {"bodies": [], "status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        job = job_for([], [f"json://127.0.0.1:{server.server_address[1]}/"], git_repo)
        exit_code, lines = notify_send(job, fast_tmp)
    finally:
        server.shutdown()
        server.server_close()
    assert exit_code == code
    assert [line["event"] for line in lines if line.get("attempt")] == tries
    assert len(handler.bodies) == len(tries)
    assert {line["target"] for line in lines} == {"apprise json://"}  # never the URL: it may hold a token
    body = handler.bodies[0]
    assert body["title"] == "hub: task T1 merged into main (0123456789ab)"
    assert body["message"].endswith("Next: nothing: see the merge with `git show 0123456789ab`")


def test_doctor_notify_sends_a_test_notification_to_each_target(
    ctx: Context, inbox: Inbox, hub: HubRunner
) -> None:
    result: list[subprocess.CompletedProcess[str]] = []
    doctor = threading.Thread(target=lambda: result.append(hub("doctor", "--notify", "--json")))
    doctor.start()
    event = inbox.event()
    doctor.join(WAIT_SECONDS)
    assert event["kind"] == "test"
    report = json.loads(result[0].stdout)
    assert result[0].returncode == 0 and report["ok"], result[0].stderr
    assert [c["name"].split(" ", 2)[:2] for c in report["checks"]] == [["notify", "command"]]


def test_doctor_notify_without_a_target_says_how_to_add_one(hub: HubRunner) -> None:
    done = hub("doctor", "--notify")
    assert done.returncode == 1
    assert "no notification target is configured" in done.stdout
    assert "notify:" in done.stdout


def test_an_unknown_event_in_notify_is_refused_naming_the_one_meant(git_repo: Path) -> None:
    (git_repo / CONFIG_FILE).write_text(
        default_yaml("demo") + "notify:\n  events: [merge]\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"notify\.events\[?\.?0\]?.*did you mean 'merged'"):
        load_config(git_repo, env={})


def test_a_configured_url_loads_apprise_in_no_command_but_the_notifier(
    hub: HubRunner, git_repo: Path, run_git: Any
) -> None:
    configure(git_repo, "\nnotify:\n  urls: ['json://127.0.0.1:9/']\n", run_git)
    for args in (("status",), ("next",), ("--help",)):
        done = hub(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert done.returncode == 0, done.stderr
        imported = {
            line.split("|")[2].strip().split(".")[0]
            for line in done.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2
        }
        assert "hub" in imported, args  # the profile was read
        assert "apprise" not in imported, args
