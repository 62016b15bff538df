"""The handoff folder: the OS lock, transitions (contract history and transition.ndjson in step),
log rotation, report files and the archive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub.core.errors import EXIT_LOCKED, ContractInvalid, InvalidTransition, LockBusy, describe, exit_code_for
from hub.state import handoff
from hub.state.handoff import Handoff, phase_lock, read_transitions, record
from hub.state.machine import EVENTS, RESUMABLE_STATES, RESUME_EVENT, Event
from hub.state.new_task import new_contract
from hub.state.store import load, save

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def make_task(folder: Path, title: str = "Greet politely") -> tuple[Handoff, dict[str, Any]]:
    contract = new_contract(project="demo", title=title, requirements=["say hello"], now=NOW, roles={})
    hand = Handoff(folder).for_task(contract["task_id"])
    hand.ensure()
    save(hand.contract, contract, NOW)
    return hand, contract


def history_as_lines(contract: dict[str, Any]) -> list[dict[str, Any]]:
    """The contract's history in transition.ndjson's shape (cost aside: history does not keep it)."""
    return [
        {
            "timestamp": entry["timestamp"],
            "task_id": contract["task_id"],
            "event": entry["event"],
            "old_status": entry["from"],
            "new_status": entry["to"],
            "status_reason": entry["reason"],
            "attempt": entry["attempt"],
        }
        for entry in contract["history"]
    ]


def read_or_empty(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def fast_tmpdir() -> tempfile.TemporaryDirectory[str]:
    """A temp dir on tmpfs when there is one: fsync there is free, and this test is about logic."""
    shm = Path("/dev/shm")
    return tempfile.TemporaryDirectory(dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None)


def without_cost(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lines without the figures history does not keep: cost, and the ordering stamp at_ns."""
    return [{k: v for k, v in line.items() if k not in ("cumulative_cost_usd", "at_ns")} for line in lines]


# --- the OS lock ---------------------------------------------------------------------------------------


def test_a_second_phase_is_refused_at_once_with_the_holders_phase_pid_and_start(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")
    with phase_lock(hand, "report-judge", NOW):
        owner = json.loads(hand.lock_owner.read_text(encoding="utf-8"))
        assert owner["pid"] == os.getpid() and owner["phase"] == "report-judge"
        with pytest.raises(LockBusy) as caught, phase_lock(hand, "setup-task", NOW):
            pass
    assert describe(caught.value) == (
        f"another phase is running (report-judge, pid {os.getpid()}, since 2026-05-01T12:00:00Z); fix: try later"
    )
    assert exit_code_for(caught.value) == EXIT_LOCKED == 75


def test_the_lock_is_free_again_after_the_phase_even_when_it_raised(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")
    with pytest.raises(RuntimeError), phase_lock(hand, "a", NOW):
        raise RuntimeError("the phase failed")
    assert not hand.lock_owner.exists()
    with phase_lock(hand, "b", NOW):
        assert handoff.lock_owner(hand)["phase"] == "b"  # type: ignore[index]
    assert handoff.lock_owner(hand) is None
    assert hand.lock_file.exists()  # filelock issue 31: the lock file itself stays


def test_a_phase_on_an_archived_task_is_refused_and_makes_no_folder(tmp_path: Path) -> None:
    # A `hub next` that lost the race: the winner archived the task between its look and its lock.
    hand, contract = make_task(tmp_path / "_handoff")
    (hand.task_dir / "runs").mkdir()
    handoff.archive_task(Handoff(hand.dir), contract["task_id"])
    with pytest.raises(ContractInvalid, match="no such file"), phase_lock(hand, "finalize-task", NOW):
        pass
    assert not hand.task_dir.exists()
    assert hand.runs(contract["task_id"]) == hand.archive / contract["task_id"] / "runs"


@pytest.mark.parametrize("error", [FileNotFoundError, FileExistsError])
def test_a_task_archived_while_its_lock_is_opened_is_refused_as_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[OSError]
) -> None:
    from filelock import FileLock

    hand, contract = make_task(tmp_path / "_handoff")

    def archived_meanwhile(_lock: FileLock) -> None:
        handoff.archive_task(Handoff(hand.dir), contract["task_id"])
        raise error(2, "moved while opening", str(hand.lock_file))

    monkeypatch.setattr(FileLock, "acquire", archived_meanwhile)
    with pytest.raises(ContractInvalid, match="no such file"), phase_lock(hand, "finalize-task", NOW):
        pass
    assert not hand.task_dir.exists()


@pytest.mark.parametrize("error", ["timeout", "not found"])
def test_a_task_archived_while_another_loser_holds_a_remade_folder_is_refused_as_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    # Three runs lose the race: the second remade the folder for its lock (and holds it, or the third
    # removed it again) while this one opened it.
    from filelock import FileLock, Timeout

    hand, contract = make_task(tmp_path / "_handoff")

    def archived_and_remade(_lock: FileLock) -> None:
        handoff.archive_task(Handoff(hand.dir), contract["task_id"])
        hand.ensure()
        if error == "timeout":
            raise Timeout(str(hand.lock_file))
        raise FileNotFoundError(2, "removed while opening", str(hand.lock_file))

    monkeypatch.setattr(FileLock, "acquire", archived_and_remade)
    with pytest.raises(ContractInvalid, match="no such file"), phase_lock(hand, "finalize-task", NOW):
        pass


def test_a_folder_remade_only_to_hold_the_lock_is_removed_and_one_with_files_is_kept(tmp_path: Path) -> None:
    # filelock makes a missing folder to hold its lock file: archived after the look, the task would
    # leave an empty husk in tasks/ that runs() reads in place of the archive.
    hand, _ = make_task(tmp_path / "_handoff")
    hand.contract.unlink()
    with pytest.raises(ContractInvalid, match="no such file"), phase_lock(hand, "finalize-task", NOW):
        pass
    assert not hand.task_dir.exists()
    hand.ensure()
    (hand.task_dir / "notes.txt").write_text("a person's\n", encoding="utf-8")
    with pytest.raises(ContractInvalid), phase_lock(hand, "finalize-task", NOW):
        pass
    assert sorted(p.name for p in hand.task_dir.iterdir()) == ["notes.txt"]


HOLDER = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from hub.state.handoff import Handoff, phase_lock
with phase_lock(Handoff(Path(sys.argv[1])), "holder", datetime.now(UTC)):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_the_kernel_frees_the_lock_of_a_killed_process(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(hand.dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        with pytest.raises(LockBusy, match=f"holder, pid {child.pid}, since "), phase_lock(hand, "x", NOW):
            pass
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert child.stdin is not None
        child.stdin.close()
    # The dead holder's owner file is still there, but the lock is free: the kernel dropped it.
    with phase_lock(hand, "after", NOW):
        assert handoff.lock_owner(hand)["pid"] == os.getpid()  # type: ignore[index]


def test_a_busy_lock_without_an_owner_file_still_refuses_cleanly(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")
    with phase_lock(hand, "a", NOW):
        hand.lock_owner.unlink()
        with (
            pytest.raises(LockBusy, match=r"another phase is running \(pid unknown\)"),
            phase_lock(hand, "b", NOW),
        ):
            pass


# --- transitions ----------------------------------------------------------------------------------------


def test_record_saves_the_contract_and_appends_one_log_line_with_the_plans_fields(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    contract["cost"] = {"judge": {"usd": 0.25}, "implementer": {"usd": 0.5}}
    record(hand, contract, "lock_acquired", NOW + timedelta(seconds=5), reason="started")
    saved = load(hand.contract)
    assert saved["status"] == "implementation_in_progress"
    assert saved["status_reason"] == "started"
    assert saved["timestamps"]["updated_at"] == "2026-05-01T12:00:05Z"
    assert saved["history"] == [
        {
            "timestamp": "2026-05-01T12:00:05Z",
            "event": "lock_acquired",
            "from": "pending_implementer",
            "to": "implementation_in_progress",
            "reason": "started",
            "attempt": 1,
        }
    ]
    lines = read_transitions(hand)
    assert isinstance(lines[0].pop("at_ns"), int)
    assert lines == [
        {
            "timestamp": "2026-05-01T12:00:05Z",
            "task_id": contract["task_id"],
            "event": "lock_acquired",
            "old_status": "pending_implementer",
            "new_status": "implementation_in_progress",
            "status_reason": "started",
            "attempt": 1,
            "cumulative_cost_usd": 0.75,
        }
    ]


def test_a_refused_transition_changes_neither_the_contract_nor_the_log(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    record(hand, contract, "lock_acquired", NOW)
    before = (hand.contract.read_bytes(), hand.transitions.read_bytes())
    with pytest.raises(InvalidTransition, match="Cannot pass from implementation_in_progress"):
        record(hand, contract, "pass", NOW + timedelta(minutes=1))
    assert (hand.contract.read_bytes(), hand.transitions.read_bytes()) == before
    assert contract["status"] == "implementation_in_progress" and len(contract["history"]) == 1


def test_the_transition_log_rotates_at_5_mb_and_is_read_across_the_rotation(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    # Long lines: the file must pass 5 MB, and parsing it back should stay cheap.
    old = {"timestamp": "2026-01-01T00:00:00Z", "task_id": "old-task", "event": "x", "pad": "." * 50_000}
    line = json.dumps(old) + "\n"
    hand.transitions.write_text(line * (handoff.ROTATE_BYTES // len(line) + 1), encoding="utf-8")
    assert hand.transitions.stat().st_size >= handoff.ROTATE_BYTES
    record(hand, contract, "lock_acquired", NOW)
    rotated = hand.transitions.with_name("transition.ndjson.1")
    assert rotated.stat().st_size >= handoff.ROTATE_BYTES
    assert len(hand.transitions.read_text(encoding="utf-8").splitlines()) == 1
    lines = read_transitions(hand)
    assert lines[0]["task_id"] == "old-task" and lines[-1]["event"] == "lock_acquired"
    assert [x["event"] for x in read_transitions(hand, contract["task_id"])] == ["lock_acquired"]


def test_reading_the_log_skips_torn_lines(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    record(hand, contract, "lock_acquired", NOW)
    with hand.transitions.open("a", encoding="utf-8") as handle:
        handle.write('{"timestamp": "2026-05-01T12:0')  # a writer killed mid-line
    assert [x["event"] for x in read_transitions(hand)] == ["lock_acquired"]


# Events drawn mostly from those the current state accepts, so sequences get deep into the machine,
# and sometimes from all events, so refusals are exercised too.
@settings(
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_event_sequences_keep_the_contract_valid_and_history_equal_to_the_log(
    events_from: Callable[[str], list[Event]], data: Any
) -> None:
    with fast_tmpdir() as tmp:
        hand, contract = make_task(Path(tmp))
        now = NOW
        steps = data.draw(st.integers(min_value=1, max_value=25), label="steps")
        for _ in range(steps):
            state = contract["status"]
            valid = events_from(state)
            if valid and data.draw(st.integers(0, 4), label="pick") > 0:
                event = data.draw(st.sampled_from(valid), label="event")
            else:
                event = data.draw(st.sampled_from(EVENTS), label="any event")
            resume_to = (
                data.draw(st.sampled_from(sorted(RESUMABLE_STATES)), label="resume_to")
                if event == RESUME_EVENT
                else None
            )
            if event in ("fail_agree", "conditional"):
                contract["attempt"] += 1
            now += timedelta(seconds=data.draw(st.integers(0, 3600), label="dt"))
            before = (hand.contract.read_bytes(), read_or_empty(hand.transitions))
            try:
                record(hand, contract, event, now, resume_to=resume_to)
            except InvalidTransition:
                if event in ("fail_agree", "conditional"):
                    contract["attempt"] -= 1
                assert (hand.contract.read_bytes(), read_or_empty(hand.transitions)) == before
                continue
            saved = load(hand.contract)  # validates
            assert saved == contract
            assert history_as_lines(saved) == without_cost(read_transitions(hand))
        assert len(read_transitions(hand)) == len(load(hand.contract)["history"])


# --- report files and the archive --------------------------------------------------------------------


def test_archiving_moves_the_tasks_files_and_the_halt_file_and_leaves_the_rest(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    for name in ("REVIEW_REQUEST.md", "JUDGE_REPORT.json", "ERIK_HALT.md"):
        (hand.task_dir / name).write_text(name, encoding="utf-8")
    (tmp_path / "backlog.json").write_text("{}", encoding="utf-8")
    target = handoff.archive_task(hand, contract["task_id"])
    assert target == tmp_path / "archive" / contract["task_id"]
    assert sorted(p.name for p in target.iterdir()) == [
        "ERIK_HALT.md",
        "JUDGE_REPORT.json",
        "REVIEW_REQUEST.md",
        "TASK_CONTRACT.json",
    ]
    assert not hand.contract.exists() and not hand.task_dir.exists()
    assert (tmp_path / "backlog.json").exists()


def test_an_old_single_task_folder_is_migrated_on_first_use_with_a_line_saying_so(
    tmp_path: Path, capsys: Any
) -> None:
    root = Handoff(tmp_path)
    contract = new_contract(project="demo", title="Old", requirements=["r"], now=NOW, roles={})
    task_id = contract["task_id"]
    save(tmp_path / "TASK_CONTRACT.json", contract, NOW)
    for name in ("REVIEW_REQUEST.md", "ERIK_HALT.md", "STALL_REPORT.md"):
        (tmp_path / name).write_text(name, encoding="utf-8")
    (tmp_path / "runs" / task_id).mkdir(parents=True)
    (tmp_path / "runs" / task_id / "001-model-call.json").write_text("{}", encoding="utf-8")
    (tmp_path / "backlog.json").write_text("{}", encoding="utf-8")
    (tmp_path / "transition.ndjson").write_text("", encoding="utf-8")

    assert root.task_ids() == [task_id]

    moved = root.for_task(task_id)
    assert load(moved.contract) == contract
    assert sorted(p.name for p in moved.task_dir.iterdir()) == [
        "ERIK_HALT.md",
        "REVIEW_REQUEST.md",
        "STALL_REPORT.md",
        "TASK_CONTRACT.json",
        "runs",
    ]
    assert (moved.runs(task_id) / "001-model-call.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "backlog.json",
        "runs",
        "tasks",
        "transition.ndjson",
    ]
    assert "handoff.migrated" in "".join(capsys.readouterr())
    assert root.task_ids() == [task_id]  # once


def test_reports_set_aside_are_numbered_and_never_overwritten(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    for text in ("first", "second"):
        hand.halt_report.write_text(text, encoding="utf-8")
        handoff.set_aside(hand, hand.halt_report, contract["task_id"], "halt")
    folder = hand.runs(contract["task_id"])
    assert [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.iterdir())] == [
        ("001-halt.md", "first"),
        ("002-halt.md", "second"),
    ]
    assert handoff.set_aside(hand, hand.halt_report, contract["task_id"], "halt") is None


def test_the_halt_file_name_is_configurable(tmp_path: Path) -> None:
    assert Handoff(tmp_path, halt_name="HALT.md", task_id="t").halt_report == tmp_path / "tasks/t/HALT.md"


def test_a_line_lost_to_a_kill_between_save_and_append_is_written_by_the_next_transition(
    tmp_path: Path,
) -> None:
    hand, contract = make_task(tmp_path)
    record(hand, contract, "lock_acquired", NOW + timedelta(seconds=1))
    # What a phase killed after contract.save and before append_transition leaves behind:
    handoff.advance(contract, "code_written", NOW + timedelta(seconds=2))
    save(hand.contract, contract, NOW + timedelta(seconds=2))
    assert len(read_transitions(hand)) == 1

    record(hand, contract, "local_pass", NOW + timedelta(seconds=3))

    lines = read_transitions(hand)
    assert without_cost(
        [{k: v for k, v in line.items() if k != "repaired"} for line in lines]
    ) == history_as_lines(contract)
    assert [line.get("repaired", False) for line in lines] == [False, True, False]


def test_the_first_transitions_lost_to_a_kill_are_repaired_even_with_other_tasks_in_the_log(
    tmp_path: Path,
) -> None:
    hand, contract = make_task(tmp_path)
    earlier = handoff.advance(
        make_task(tmp_path / "other", title="Earlier task")[1], "lock_acquired", NOW - timedelta(hours=1)
    )
    handoff.append_transition(hand, earlier)  # an earlier task's line in the same log
    handoff.advance(contract, "lock_acquired", NOW + timedelta(seconds=1))
    save(hand.contract, contract, NOW + timedelta(seconds=1))

    record(hand, contract, "code_written", NOW + timedelta(seconds=2))

    mine = read_transitions(hand, contract["task_id"])
    assert [line["event"] for line in mine] == ["lock_acquired", "code_written"]
    assert len(read_transitions(hand)) == 3


def test_a_log_line_the_history_lacks_is_not_second_guessed(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    record(hand, contract, "lock_acquired", NOW + timedelta(seconds=1))
    stranger = {**read_transitions(hand)[0], "timestamp": "2026-05-01T12:00:09Z", "event": "hand_written"}
    handoff.append_transition(hand, stranger)

    record(hand, contract, "code_written", NOW + timedelta(seconds=2))

    assert [line["event"] for line in read_transitions(hand)] == [
        "lock_acquired",
        "hand_written",
        "code_written",
    ]


def test_a_save_removes_temp_files_that_killed_saves_left_a_while_ago(tmp_path: Path) -> None:
    hand, contract = make_task(tmp_path)
    old = hand.task_dir / ".TASK_CONTRACT.json.killed.tmp"
    young = hand.task_dir / ".TASK_CONTRACT.json.running.tmp"
    old.write_text("{half", encoding="utf-8")
    young.write_text("{half", encoding="utf-8")
    later = NOW + timedelta(minutes=5)
    os.utime(old, (NOW.timestamp(), NOW.timestamp()))
    os.utime(young, (later.timestamp(), later.timestamp()))

    save(hand.contract, contract, later)

    assert not old.exists()
    assert young.exists()


def test_tasks_appending_at_once_across_a_rotation_lose_no_line(fast_tmp: Path) -> None:
    import threading

    from hub.state.handoff import ROTATE_BYTES, append_transition

    hand = Handoff(fast_tmp / "_handoff")
    hand.ensure()
    padding = "x" * 1000
    per_thread = ROTATE_BYTES // 1000 // 2 + 200  # together a little over one rotation's worth

    def append(task: str) -> None:
        for n in range(per_thread):
            append_transition(hand, {"task_id": task, "n": n, "pad": padding})

    threads = [threading.Thread(target=append, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert hand.transitions.with_name("transition.ndjson.1").exists()  # it did rotate
    lines = read_transitions(hand)
    for task in ("a", "b"):
        assert [line["n"] for line in lines if line["task_id"] == task] == list(range(per_thread))
