"""The one error tree of agent-hub, the exit code each error maps to, and how a person reads one.

    HubError (exit 1)
    ├── ContractInvalid            the contract (or a report) fails validation
    ├── ConfigError                hub.yaml or the environment is wrong
    │   └── NotInitialised         no git repository here, or `hub init` has not run
    ├── GitError                   a git operation failed
    │   ├── DirtyWorkTree          uncommitted changes where a clean tree is needed
    │   ├── MergeConflict          the task branch does not merge cleanly (hub.repo.gitops)
    │   └── MergeRefused           the checkout's changes stand in a merge's way (hub.repo.gitops)
    ├── EditError                  model output could not become file edits, or an edit was refused
    ├── RuleError                  an ast-grep rule is invalid, missing, or the scanner failed
    ├── SandboxUnavailable         `sandbox: required`, but no sandbox here (hub.safety.sandbox)
    ├── CgroupRefused              a command could not enter its cgroup; it did not run (hub.safety.cgroup)
    ├── ReviewParseError           the reviewer's answer holds no review (also a ValueError; hub.phases.local_review)
    ├── WorkerError                talking to a model failed
    │   ├── WorkerUnavailable      an outage: down, restarting, connection reset, 5xx (waited out, then a halt)
    │   │   └── ServerFailed       reached, but answered broken (tried a few times, not waited out)
    │   ├── ServerBroken           it answered broken several times in a row: a stall strike
    │   ├── ModelNotFound          the server does not have the model
    │   ├── WorkerTimeout          one of the three clocks ran out (also a TimeoutError)
    │   ├── PhaseTimeout           the phase's own clock is spent: no new call or command starts (also a TimeoutError)
    │   ├── ContextOverflow        the prompt and its answer do not fit the window (deterministic)
    │   ├── MalformedStream        the server sent something that is not its protocol
    │   ├── RunawayOutput          the model repeats the same lines over and over: stopped early
    │   │   └── ReplyTooLarge      the answer passed limits.max_reply_chars: stopped while it streamed
    │   └── MCPError               an MCP call failed
    │       ├── MCPTimeoutError    the call ran past its timeout (also a TimeoutError)
    │       └── MCPServerCrashed   the server process died
    ├── WrongState (exit 3)        the task is not in a state this command accepts
    │   └── InvalidTransition      the state machine has no such edge
    ├── TaskHalted (exit 4)        the task waits for a person in erik_consultation
    ├── TaskChoice (exit 2)        no task of that id, or several fit and none was named (--task)
    ├── SuiteInvalid (exit 2)      `hub eval` was given no suite of exercises, or a history that makes no task
    └── LockBusy (exit 75)         another phase holds the lock
        └── NoSpace                the disk is too full for a step: nothing changed, tried again later

Any of them may carry a `hint`: what a person can do about it, kept apart from the message (as pip's
DiagnosticPipError keeps its hint). `exit_code_for` is the single mapping the CLI uses; `with_hint` is
the single way a message and its hint are shown (`describe` for an error): by the CLI, the MCP tools
and a halt (whose `Trip` carries a hint too).
"""

from __future__ import annotations

from hub.core.text import listed

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_WRONG_STATE = 3
EXIT_HALTED = 4
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130  # 128 + SIGINT: `hub next` stopped by a second Ctrl-C


class HubError(Exception):
    """Base of every error agent-hub raises on purpose."""

    exit_code = EXIT_ERROR
    hint: str = ""

    def __init__(self, *args: object, hint: str = "") -> None:
        super().__init__(*args)
        if hint:
            self.hint = hint


class ContractInvalid(HubError):
    """A contract or report file fails validation."""

    def __init__(self, file: str, json_path: str, problem: str, *, hint: str = "") -> None:
        self.file = file
        self.json_path = json_path
        self.problem = problem
        super().__init__(f"{file}: {json_path}: {problem}", hint=hint)


class ConfigError(HubError):
    """hub.yaml or the environment holds a bad value."""


class NotInitialised(ConfigError):
    """The folder is not a git repository, or `hub init` has not run in it; nothing was changed."""


class GitError(HubError):
    """A git operation failed."""


class DirtyWorkTree(GitError):
    """The work tree has uncommitted changes where a clean one is needed."""

    def __init__(self, files: list[str]) -> None:
        self.files = files
        super().__init__(
            f"work tree has uncommitted changes: {listed(files, 10)}", hint="commit or stash them first"
        )


class EditError(HubError):
    """Model output could not be turned into edits, or an edit was refused."""


class RuleError(HubError):
    """An ast-grep rule is invalid or missing, or the scanner failed."""


class WorkerError(HubError):
    """Talking to a model failed. `partial_text` is what the model had said before it failed."""

    partial_text: str = ""


class WorkerUnavailable(WorkerError):
    """The model server is down, restarting, resetting connections or answering 5xx: an outage, worth
    waiting out (limits.server_wait_minutes)."""

    def __init__(self, message: str, partial_text: str = "", hint: str = "") -> None:
        self.partial_text = partial_text
        super().__init__(message, hint=hint)


class ServerFailed(WorkerUnavailable):
    """The server was reached and answered, but broken: an error mid-generation, a stream that ended
    without its final message, a 500 loading the model (out of memory). Tried again a few times
    (hub/workers/outage.py), never waited out for limits.server_wait_minutes like an outage."""


class ServerBroken(WorkerError):
    """The server answered broken several times in a row: not an outage, a stall strike with what the
    server said."""

    def __init__(self, message: str, partial_text: str = "") -> None:
        self.partial_text = partial_text
        super().__init__(message)


class ModelNotFound(WorkerError):
    """The model server does not have the requested model."""

    def __init__(self, model: str, detail: str = "") -> None:
        self.model = model
        super().__init__(detail or f"model '{model}' not found")


class WorkerTimeout(WorkerError, TimeoutError):
    """One of the three clocks ran out: first_token, stall (gap between tokens) or total."""

    def __init__(self, clock: str, seconds: float, partial_text: str = "") -> None:
        self.clock = clock
        self.seconds = seconds
        self.partial_text = partial_text
        super().__init__(f"{clock} timeout after {seconds:g}s")


class PhaseTimeout(WorkerError, TimeoutError):
    """The phase's own clock (`limits.timeout_minutes.<phase>`) is spent: nothing new may start."""

    def __init__(self, phase: str, what: str, minutes: float) -> None:
        self.phase = phase
        self.what = what
        self.minutes = minutes
        super().__init__(f"{phase} spent its clock ({minutes:g} min) before {what} could start")


class ContextOverflow(WorkerError):
    """The prompt and its answer do not fit the model's context window: deterministic, never retried
    unchanged. `source` is "estimate" (refused before sending) or "server" (the server said so, or
    read fewer tokens than were sent)."""

    def __init__(
        self,
        prompt_tokens: int,
        num_ctx: int,
        *,
        answer_tokens: int = 0,
        context_length: int | None = None,
        configured_num_ctx: int | None = None,
        source: str = "estimate",
        detail: str = "",
        server_window: int | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.num_ctx = num_ctx
        self.answer_tokens = answer_tokens
        self.context_length = context_length
        self.source = source
        self.server_window = server_window
        approx = "~" if source == "estimate" else ""
        answer = f" plus {answer_tokens} for the answer" if answer_tokens else ""
        if server_window is not None:
            # The server's own window, smaller than num_ctx: raising num_ctx in hub.yaml changes nothing.
            configured = f" (hub.yaml: num_ctx={configured_num_ctx})" if configured_num_ctx else ""
            super().__init__(
                (detail + ": " if detail else "")
                + f"prompt of {approx}{prompt_tokens} tokens{answer} does not fit the server's own window of "
                f"{server_window} tokens{configured}. The server sets that window, not hub.yaml",
                hint="start it with a larger one (llama-server -c/--ctx-size; Ollama's OLLAMA_CONTEXT_LENGTH "
                f"for /v1 and ollama-mcp), or set models.<model>.num_ctx to {server_window} so prompts are "
                "planned for it; or send fewer source files or outlines of them",
            )
            return
        capped = ""
        if configured_num_ctx and context_length and configured_num_ctx > context_length:
            capped = (
                f" (num_ctx {configured_num_ctx} is capped to the model's context_length {context_length})"
            )
        larger = f" up to the model's {context_length}" if context_length else ""
        super().__init__(
            (detail + ": " if detail else "")
            + f"prompt of {approx}{prompt_tokens} tokens{answer} does not fit num_ctx={num_ctx}{capped}",
            hint="send fewer source files or outlines of them, ask for search/replace edits instead of whole "
            f"files, or raise models.<model>.num_ctx in hub.yaml{larger}",
        )


class MalformedStream(WorkerError):
    """The server answered with something that is not its protocol."""


class RunawayOutput(WorkerError):
    """The model fell into a loop, writing the same few lines again and again; the call was stopped."""

    def __init__(self, message: str, partial_text: str = "") -> None:
        self.partial_text = partial_text
        super().__init__(message)


class ReplyTooLarge(RunawayOutput):
    """The answer passed limits.max_reply_chars; the stream was cut there."""


class MCPError(WorkerError):
    """An MCP request failed."""

    def __init__(self, message: str, code: int | None = None) -> None:
        self.code = code
        super().__init__(message)


class MCPTimeoutError(MCPError, TimeoutError):
    """An MCP request ran past its timeout."""


class MCPServerCrashed(MCPError):
    """The MCP server process died."""

    def __init__(self, message: str, exit_code: int | None = None, stderr_tail: str = "") -> None:
        self.server_exit_code = exit_code
        self.stderr_tail = stderr_tail
        super().__init__(message)


class WrongState(HubError):
    """The task is not in a state this command accepts."""

    exit_code = EXIT_WRONG_STATE

    def __init__(
        self, message: str, found: str | None = None, recovered: bool = False, *, hint: str = ""
    ) -> None:
        # Set by the phase gate only: the state found once the lock was held, and whether this run's own
        # crash recovery put the task there.
        self.found = found
        self.recovered = recovered
        super().__init__(message, hint=hint)


class NoSuchTarget(WrongState):
    """A state no command may move a task to was named (`hub resume --to bogus`): a usage error, whatever
    the task's own state."""

    exit_code = EXIT_USAGE


class InvalidTransition(WrongState):
    """The state machine has no edge for this event from this state."""

    def __init__(self, state: str, event: str) -> None:
        self.state = state
        self.event = event
        super().__init__(f"Cannot {event} from {state}")


class TaskHalted(HubError):
    """The task is halted in erik_consultation and needs a person."""

    exit_code = EXIT_HALTED


class TaskChoice(HubError):
    """The command does not know which task to act on: name one with --task (MCP: task_id)."""

    exit_code = EXIT_USAGE


class SuiteInvalid(HubError):
    """`hub eval` was given no suite (a folder without an exercise, an exercise naming files it lacks) or a
    history that makes no task (no git repository, no commit that qualifies, an environment pip cannot
    install)."""

    exit_code = EXIT_USAGE


class LockBusy(HubError):
    """Another phase holds the handoff lock."""

    exit_code = EXIT_LOCKED


class NoSpace(LockBusy):
    """The disk is too full for a step that needs space (the judge's checkout): nothing of the task
    changed, and the next run tries again; the message names what could not be written and the space
    it needs."""


def with_hint(message: str, hint: str = "") -> str:
    """A message as a person reads it, its hint after it (`...; fix: <hint>`)."""
    return f"{message}; fix: {hint}" if hint else message


def describe(error: HubError) -> str:
    """An error as a person reads it: its message, then its hint."""
    return with_hint(str(error), error.hint)


def exit_code_for(error: BaseException) -> int:
    """The process exit code for an error (1 for anything not ours)."""
    return error.exit_code if isinstance(error, HubError) else EXIT_ERROR
