"""A model call for a phase (`generate`): held to the phase's clock and a model-server slot, an outage
waited out (`wait_for_server`), its cost put in the contract and the call kept as a provenance record."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TypeVar

from hub.core.errors import HubError, WorkerTimeout, WorkerUnavailable, describe
from hub.core.log import get_logger
from hub.phases.live import CALL_FILE, Call, live_call
from hub.phases.run import Run
from hub.state.contract import ServerWait, iso
from hub.state.provenance import write_record
from hub.workers import gpu_gate
from hub.workers.base import ChatRequest, Generation, Worker
from hub.workers.bridge import observe_call, with_remembered_prefix
from hub.workers.outage import Wait, wait_out

log = get_logger(__name__)
T = TypeVar("T")


def generate(run: Run, worker: Worker, role: str, request: ChatRequest, purpose: str = "") -> Generation:
    """One model call for `role`, an outage waited out (`wait_for_server`). Whatever happens, its
    tokens and seconds go into the contract's cost and the call into runs/<task_id>/ as a
    provenance record; a call the server counted and read whole calibrates the model's estimate."""
    left = run.remaining(f"the {role} model call ({purpose or 'call'})")
    if left is not None and left < request.total_timeout:
        request = replace(request, total_timeout=left)
    generation: Generation | None = None
    outcome = "ok"
    partial = ""
    started = time.monotonic()
    try:
        with live_call(role, request.model, run.ctx.handoff.task_dir / CALL_FILE) as call:
            request = replace(with_remembered_prefix(run.ctx.config, request), on_progress=call.progress)
            # Each try holds a model-server slot only while it calls: an outage is waited out without one.
            generation = wait_for_server(
                run, lambda: _generate_in_slot(run, worker, role, request, call), call
            )
        generation = observe_call(run.ctx.config, request, generation)
        return generation
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {describe(exc) if isinstance(exc, HubError) else exc}"
        partial = str(getattr(exc, "partial_text", "") or "")
        raise
    finally:
        g = generation
        run.add_cost(
            role, g.prompt_tokens if g else 0, g.completion_tokens if g else 0, g.seconds if g else 0.0
        )
        write_record(
            run.ctx.handoff,
            run.task_id,
            "model-call",
            {
                "role": role,
                "purpose": purpose,
                "attempt": run.contract["attempt"],
                "model": request.model,
                "num_ctx": (g.num_ctx if g and g.num_ctx else request.num_ctx),
                "num_predict": request.num_predict,
                "system": request.system or "",
                "prompt": request.prompt,
                "response": g.raw if g else partial,
                "thinking": g.thinking if g else "",
                "prompt_tokens": g.prompt_tokens if g else 0,
                "completion_tokens": g.completion_tokens if g else 0,
                "tokens_estimated": g.tokens_estimated if g else False,
                "seconds": g.seconds if g else 0.0,
                "first_token_seconds": g.first_token_seconds if g else 0.0,
                "load_seconds": g.load_seconds if g else 0.0,
                "call_seconds": round(time.monotonic() - started, 3),
                "done_reason": g.done_reason if g else "",
                "truncated": g.truncated if g else False,
                "outcome": outcome,
            },
            run.now,
        )


def never_answered(run: Run) -> bool:
    """No model call of the task has been answered yet (its cost holds no tokens)."""
    return not any(c.get("tokens_in") or c.get("tokens_out") for c in run.contract.get("cost", {}).values())


def wait_for_server(
    run: Run,
    call: Callable[[], T],
    live: Call | None = None,
    first_contact: bool = False,
    during: str = "model call",
) -> T:
    """`call()`, an unreachable, restarting or failing model server waited out with back-off for up
    to limits.server_wait_minutes; the wait is in the contract (`hub status`) while it lasts. With
    `first_contact` (the health check of a task no server has answered yet), a server that cannot be
    reached is said so at once, with what to do, and waited for less long; a call that reached the
    server and waits in its queue is never one. A wait, once over, is one `server.waited` line with
    its seconds and `during` (what waited: `hub eval` counts no wait as the hub's own time)."""
    since: list[float] = []  # when the outage began, on run.ctx.monotonic

    def on_wait(wait: Wait | None) -> None:
        if wait is not None and not since:
            since.append(wait.since)
        if wait is not None and wait.attempts == 1 and wait.first_contact:
            log.warning("server.not_reached", task=run.task_id, phase=run.phase, fix=not_reached(wait))
        if live is not None:
            live.waits_for(
                None
                if wait is None
                else f"the model server (try {wait.attempts + 1} in {wait.next_pause:g} s)"
            )
        if wait is None:
            run.task.clear_server_wait()
            log.info("server.back", task=run.task_id, phase=run.phase)
        else:
            waiting: ServerWait = {
                "since": iso(run.now - timedelta(seconds=wait.waited)),
                "waited_seconds": round(wait.waited, 1),
                "limit_minutes": round(wait.limit / 60, 1),
                "attempts": wait.attempts,
                "next_try_seconds": round(wait.next_pause, 1),
                "error": wait.error[:500],
            }
            run.task.set_server_wait(waiting)
            log.warning("server.wait", task=run.task_id, phase=run.phase, **waiting)
        run.save()

    try:
        return wait_out(
            call,
            limit_seconds=run.ctx.config.server_wait_minutes * 60,
            on_wait=on_wait,
            sleep=run.ctx.sleep,
            clock=run.ctx.monotonic,
            first_contact=first_contact,
        )
    finally:
        if since:
            waited = round(run.ctx.monotonic() - since[0], 3)
            log.info("server.waited", task=run.task_id, phase=run.phase, during=during, seconds=waited)


def not_reached(wait: Wait) -> str:
    """What a person needs when the model server has never answered: what is missing, how to start it
    or point elsewhere, that Ctrl-C loses nothing, and the key that shortens the wait (issue 27)."""
    return (
        f"no model server answers ({wait.error}). Start it (`ollama serve`; no GPU: `make real-model`, or "
        'the stand-in model `hub-standin --script FILE`, README "No GPU yet"), or point OLLAMA_HOST '
        "(ollama.host / openai.base_url in hub.yaml) at one; `hub doctor` checks the set-up. "
        f"Waiting up to {wait.limit / 60:g} min for it (limits.server_wait_minutes shortens that; 0: "
        "no wait). Ctrl-C is safe: nothing is lost and the next `hub next` resumes the task."
    )


def _generate_in_slot(run: Run, worker: Worker, role: str, request: ChatRequest, call: Call) -> Generation:
    """The call itself, holding a slot of a model server (hub/workers/gpu_gate.py): never more calls at once per
    server than its slots; the wait is bounded by the role's total clock."""
    config = run.ctx.config
    servers = config.model_servers()
    gate = gpu_gate.gate_for(config.handoff_dir, [gpu_gate.Host(url, slots) for url, slots in servers])
    deadline = time.monotonic() + min(config.role(role).timeouts.total, request.total_timeout)
    call.waits_for("a GPU slot")
    with gate.slot(request.model, request.num_ctx, deadline) as host:
        call.waits_for(None)
        try:
            if len(servers) == 1 or host.url == config.ollama_host:
                return worker.generate(request)
            other = run.ctx.worker(role, host.url)
            try:
                return other.generate(request)
            finally:
                other.close()
        except WorkerTimeout as exc:
            others = gate.held(host) - 1 if exc.clock == "first_token" else 0
            if others <= 0:
                raise
            # ollama.slots above the server's own parallelism (OLLAMA_NUM_PARALLEL): this call waited in
            # the server's queue behind the hub's own calls. Not the model's fault: waited out, no strike.
            raise WorkerUnavailable(
                f"{host.url}: no first token from {request.model} within {exc.seconds:g} s while {others} "
                f"other call(s) of the hub ran on the same server: its queue, not the model",
                hint="set ollama.slots to the server's OLLAMA_NUM_PARALLEL",
            ) from exc
