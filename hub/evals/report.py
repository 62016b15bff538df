"""What `hub eval` found: per task and in total, as one JSON document and a markdown table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hub.evals.history import Skipped
from hub.state.machine import ERIK_CONSULTATION, MERGED


@dataclass(frozen=True)
class TaskResult:
    """What became of one exercise."""

    name: str
    task_id: str
    status: str  # the task's last state: merged, erik_consultation, ...
    solved: bool  # merged, and its tests pass on the base afterwards
    tests_pass: bool | None  # on the base when merged, else on the task branch (None: nothing to run)
    halt_trigger: str | None
    halt_reason: str | None
    stalls: int
    attempts: int
    model_calls: int
    tokens_in: int
    tokens_out: int
    model_seconds: float
    hub_seconds: float  # in phases, less model calls and commands: the hub's own time
    agent_turns: int = 0  # agent mode's turns over all attempts (0 in edit mode)
    # `hub eval --history` only: of the files the commit changed (needed), how many the task's change
    # touched too (found); None where there is no change of the model's to look at.
    files_found: int | None = None
    files_needed: int | None = None

    @property
    def halted(self) -> bool:
        return self.status == ERIK_CONSULTATION

    @property
    def false_halt(self) -> bool:
        """A halt of work whose tests pass: a person comes back to nothing done, for nothing."""
        return self.halted and bool(self.tests_pass)

    @property
    def wrong_merge(self) -> bool:
        return self.status == MERGED and not self.tests_pass


HISTORY_ONLY = ("files_found", "files_needed")


@dataclass(frozen=True)
class EvalReport:
    suite: str
    config: str
    models: dict[str, str]
    seconds: float
    tasks: list[TaskResult] = field(default_factory=list)
    mode: str = "edit"  # the implementer's mode: edit or agent
    hidden_files: bool = False  # the tasks named the exercise's folder only
    history: bool = False  # tasks made from a repository's commits (`hub eval --history`)
    skipped: list[Skipped] = field(default_factory=list)  # with history: the commits that made no task

    def totals(self) -> dict[str, Any]:
        t = self.tasks
        return {
            "tasks": len(t),
            "solved": sum(r.solved for r in t),
            "halted": sum(r.halted for r in t),
            "halts_of_passing_work": sum(r.false_halt for r in t),
            "merged_with_failing_tests": sum(r.wrong_merge for r in t),
            "unfinished": sum(not r.halted and r.status != MERGED for r in t),
            "stalls": sum(r.stalls for r in t),
            "model_calls": sum(r.model_calls for r in t),
            "agent_turns": sum(r.agent_turns for r in t),
            "tokens_in": sum(r.tokens_in for r in t),
            "tokens_out": sum(r.tokens_out for r in t),
            "model_seconds": round(sum(r.model_seconds for r in t), 1),
            "hub_seconds": round(sum(r.hub_seconds for r in t), 2),
        }

    def to_json(self) -> dict[str, Any]:
        tasks = [{**asdict(r), "halted": r.halted, "false_halt": r.false_halt} for r in self.tasks]
        if not self.history:
            # An exercise names its file: the exercism report stays as it was.
            for task in tasks:
                for key in HISTORY_ONLY:
                    task.pop(key)
        doc: dict[str, Any] = {
            "suite": self.suite,
            "config": self.config,
            "models": self.models,
            "seconds": self.seconds,
            "mode": self.mode,
            "hidden_files": self.hidden_files,
            "totals": self.totals(),
            "tasks": tasks,
        }
        if self.history:
            found = [r for r in self.tasks if r.files_needed is not None]
            doc["totals"] |= {
                "files_found": sum(r.files_found or 0 for r in found),
                "files_needed": sum(r.files_needed or 0 for r in found),
                "skipped": len(self.skipped),
            }
            doc["skipped"] = [asdict(s) for s in self.skipped]
        return doc

    def to_markdown(self) -> str:
        total = self.totals()
        models = ", ".join(f"{role} `{m}`" for role, m in self.models.items()) or "(models not read)"
        what = f"Repository `{self.suite}` (its commits)" if self.history else f"Suite `{self.suite}`"
        lines = [
            f"# hub eval: {total['solved']} of {total['tasks']} solved",
            "",
            f"{what}, configuration `{self.config}`: {models}; implementer mode {self.mode}"
            + (
                (
                    ", the tasks naming no file"
                    if self.history
                    else ", the tasks naming only the exercise's folder"
                )
                if self.hidden_files
                else ""
            )
            + f". {self.seconds:.0f} s in all.",
            "",
            f"Solved {total['solved']}, halted {total['halted']} (of them with passing tests: "
            f"{total['halts_of_passing_work']}), merged with failing tests {total['merged_with_failing_tests']}, "
            f"unfinished {total['unfinished']}; {total['stalls']} stalls, {total['model_calls']} model calls "
            f"({total['agent_turns']} agent turns), "
            f"{total['tokens_in']} tokens in / {total['tokens_out']} out, model {total['model_seconds']} s, "
            f"hub {total['hub_seconds']} s.",
            "",
            "| task | result | tests | stalls | calls | turns | tokens in/out | model s | hub s |"
            + (" files found/needed |" if self.history else ""),
            "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"
            + (" --- |" if self.history else ""),
        ]
        for r in self.tasks:
            result = "solved" if r.solved else (f"halted: {r.halt_trigger}" if r.halted else r.status)
            tests = {True: "pass", False: "fail", None: "-"}[r.tests_pass]
            files = "-" if r.files_needed is None else f"{r.files_found}/{r.files_needed}"
            lines.append(
                f"| {r.name} | {result} | {tests} | {r.stalls} | {r.model_calls} | {r.agent_turns} "
                f"| {r.tokens_in}/{r.tokens_out} "
                f"| {r.model_seconds} | {r.hub_seconds} |" + (f" {files} |" if self.history else "")
            )
        halts = [r for r in self.tasks if r.halted]
        if halts:
            lines += ["", "## Halts", ""]
            lines += [
                f"- {r.name} ({r.task_id}): {r.halt_trigger}"
                + (" — its tests pass" if r.false_halt else "")
                + f": {r.halt_reason}"
                for r in halts
            ]
        if self.skipped:
            lines += ["", f"## Commits that made no task ({len(self.skipped)})", ""]
            lines += [
                f"- {s.sha[:10]} {s.subject}: {s.reason}"
                + (f" ({s.detail.strip().splitlines()[-1][:200]})" if s.detail.strip() else "")
                for s in self.skipped
            ]
        return "\n".join(lines) + "\n"
