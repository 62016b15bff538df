"""What `hub eval` found: per task and in total, as one JSON document and a markdown table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class EvalReport:
    suite: str
    config: str
    models: dict[str, str]
    seconds: float
    tasks: list[TaskResult] = field(default_factory=list)
    mode: str = "edit"  # the implementer's mode: edit or agent
    hidden_files: bool = False  # the tasks named the exercise's folder only

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
        return {
            "suite": self.suite,
            "config": self.config,
            "models": self.models,
            "seconds": self.seconds,
            "mode": self.mode,
            "hidden_files": self.hidden_files,
            "totals": self.totals(),
            "tasks": tasks,
        }

    def to_markdown(self) -> str:
        total = self.totals()
        models = ", ".join(f"{role} `{m}`" for role, m in self.models.items()) or "(models not read)"
        lines = [
            f"# hub eval: {total['solved']} of {total['tasks']} solved",
            "",
            f"Suite `{self.suite}`, configuration `{self.config}`: {models}; implementer mode {self.mode}"
            + (", the tasks naming only the exercise's folder" if self.hidden_files else "")
            + f". {self.seconds:.0f} s in all.",
            "",
            f"Solved {total['solved']}, halted {total['halted']} (of them with passing tests: "
            f"{total['halts_of_passing_work']}), merged with failing tests {total['merged_with_failing_tests']}, "
            f"unfinished {total['unfinished']}; {total['stalls']} stalls, {total['model_calls']} model calls "
            f"({total['agent_turns']} agent turns), "
            f"{total['tokens_in']} tokens in / {total['tokens_out']} out, model {total['model_seconds']} s, "
            f"hub {total['hub_seconds']} s.",
            "",
            "| task | result | tests | stalls | calls | turns | tokens in/out | model s | hub s |",
            "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
        ]
        for r in self.tasks:
            result = "solved" if r.solved else (f"halted: {r.halt_trigger}" if r.halted else r.status)
            tests = {True: "pass", False: "fail", None: "-"}[r.tests_pass]
            lines.append(
                f"| {r.name} | {result} | {tests} | {r.stalls} | {r.model_calls} | {r.agent_turns} "
                f"| {r.tokens_in}/{r.tokens_out} "
                f"| {r.model_seconds} | {r.hub_seconds} |"
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
        return "\n".join(lines) + "\n"
