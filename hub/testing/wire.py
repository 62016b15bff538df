"""The shapes of Ollama's answers: NDJSON chunks (/api/chat, /api/generate), SSE (/v1), metrics, models."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hub.testing import tool_shapes
from hub.testing.replies import Reply

VERSION = "0.6.8"
RUNNER_CRASHED = "llama runner process has terminated: exit status 2"


def split_at(pieces: list[tuple[str, str]], marks: Iterable[int | None]) -> list[tuple[str, str]]:
    """Split the pieces so that every mark (a character position) falls on a piece boundary."""
    cuts = sorted({m for m in marks if m is not None and m > 0})
    out: list[tuple[str, str]] = []
    pos = 0
    for name, piece in pieces:
        start = pos
        end = pos + len(piece)
        for cut in cuts:
            if start < cut < end:
                out.append((name, piece[start - pos : cut - pos]))
                start = cut
        out.append((name, piece[start - pos :]))
        pos = end
    return out


@dataclass(frozen=True)
class Timing:
    started: float
    first_token: float
    finished: float


class Format:
    """One API's shape: chunks, the final chunk, the whole (non-streamed) body and errors."""

    content_type = "application/x-ndjson"
    stream_default = True
    speaks_tools = False  # the reply's tool calls go out on this API (pieces named "tool:<index>")

    def __init__(self, model: str, body: dict[str, Any], reply: Reply) -> None:
        self.model = model
        self.body = body
        self.reply = reply
        self.think_field = bool(reply.thinking) and (reply.thinking_field or bool(body.get("think")))
        # Set by the server: what it read of the prompt (its window may have cut it), the tokens of it its
        # prompt cache held (not counted, as Ollama counts), and the load time.
        self.evaluated: int | None = None
        self.cached = 0
        self.load_seconds = 0.0

    @staticmethod
    def error_body(message: str, status: int = 500) -> dict[str, Any]:
        return {"error": message}

    def pieces(self) -> list[tuple[str, str]]:
        r = self.reply
        if self.think_field:
            segments = [("thinking", r.thinking), ("content", r.text)]
        elif r.thinking:
            segments = [("content", f"<think>\n{r.thinking}\n</think>\n\n{r.text}")]
        else:
            segments = [("content", r.text)]
        size = max(1, r.chunk_chars)
        out = [(name, s[i : i + size]) for name, s in segments for i in range(0, len(s), size)]
        if self.speaks_tools:
            # A call's arguments as the model generated them, after the text; at least one piece per call.
            for index, call in enumerate(r.tool_calls):
                text = tool_shapes.arguments_text(call)
                out += [(f"tool:{index}", text[i : i + size]) for i in range(0, max(1, len(text)), size)]
        return out

    def line(self, payload: dict[str, Any]) -> str:
        return self.line_raw(dumps(payload))

    def line_raw(self, text: str) -> str:
        return text + "\n"

    def end(self) -> str:
        return ""

    def failed_midstream(self) -> list[str]:
        """Ollama's own API ends a generation that failed mid-stream with an error line."""
        return [self.line(self.error_body(self.reply.error or RUNNER_CRASHED))]

    def prompt_text(self) -> str:
        return "".join(tool_shapes.message_texts(self.body))

    def counts(self) -> tuple[int, int]:
        r = self.reply
        if r.prompt_eval_count is not None:
            prompt = r.prompt_eval_count
        elif self.evaluated is not None:
            prompt = self.evaluated
        else:
            prompt = len(self.prompt_text()) // 4 + 1
        if r.prompt_eval_count is None:
            prompt = max(1, prompt - self.cached)
        streamed = sum(len(p) for _, p in self.pieces())
        return prompt, r.eval_count if r.eval_count is not None else streamed // 4 + 1

    def metrics(self, t: Timing) -> dict[str, Any]:
        prompt, evals = self.counts()
        total = max(1, int((t.finished - t.started) * 1e9))
        # A warm model still reports a little load time, as Ollama does.
        load = int(self.load_seconds * 1e9) if self.load_seconds else min(total // 10, 1_500_000)
        prompt_ns = max(1, int((t.first_token - t.started) * 1e9) - load)
        return {
            "total_duration": total,
            "load_duration": load,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": prompt_ns,
            "eval_count": evals,
            "eval_duration": max(1, total - load - prompt_ns),
        }

    def chunk(self, field_name: str, piece: str) -> dict[str, Any] | None:
        """The streamed chunk for one piece; None when the piece goes out in an earlier chunk."""
        raise NotImplementedError

    def final(self, t: Timing) -> list[dict[str, Any]]:
        raise NotImplementedError

    def whole(self, t: Timing) -> dict[str, Any]:
        raise NotImplementedError

    def text_and_thinking(self) -> tuple[str, str]:
        content = "".join(p for name, p in self.pieces() if name == "content")
        thinking = "".join(p for name, p in self.pieces() if name == "thinking")
        return content, thinking


class Chat(Format):
    speaks_tools = True

    def __init__(self, model: str, body: dict[str, Any], reply: Reply) -> None:
        super().__init__(model, body, reply)
        self.generated: dict[int, int] = {}  # characters of each call generated so far

    def chunk(self, field_name: str, piece: str) -> dict[str, Any] | None:
        if field_name.startswith("tool:"):
            # Ollama holds a call back while the model writes it and sends it whole, in one chunk of its
            # own, once it parses (tool_shapes.py): nothing streams meanwhile.
            index = int(field_name.removeprefix("tool:"))
            self.generated[index] = self.generated.get(index, 0) + len(piece)
            if self.generated[index] < len(tool_shapes.arguments_text(self.reply.tool_calls[index])):
                return None
            call = tool_shapes.ollama_call(self.reply.tool_calls[index])
            calls = {"role": "assistant", "content": "", "tool_calls": [call]}
            return {"model": self.model, "created_at": timestamp(), "message": calls, "done": False}
        message: dict[str, Any] = {"role": "assistant", "content": piece if field_name == "content" else ""}
        if field_name == "thinking":
            message["thinking"] = piece
        return {"model": self.model, "created_at": timestamp(), "message": message, "done": False}

    def final(self, t: Timing) -> list[dict[str, Any]]:
        return [
            {
                "model": self.model,
                "created_at": timestamp(),
                "message": {"role": "assistant", "content": ""},
                "done_reason": self.reply.done_reason,
                "done": True,
                **self.metrics(t),
            }
        ]

    def whole(self, t: Timing) -> dict[str, Any]:
        content, thinking = self.text_and_thinking()
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        if self.reply.tool_calls:
            message["tool_calls"] = [tool_shapes.ollama_call(call) for call in self.reply.tool_calls]
        final = self.final(t)[0]
        final["message"] = message
        return final


class Completion(Format):
    def prompt_text(self) -> str:
        return str(self.body.get("system") or "") + str(self.body.get("prompt") or "")

    def chunk(self, field_name: str, piece: str) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "created_at": timestamp()}
        out["response"] = piece if field_name == "content" else ""
        if field_name == "thinking":
            out["thinking"] = piece
        out["done"] = False
        return out

    def final(self, t: Timing) -> list[dict[str, Any]]:
        prompt, evals = self.counts()
        return [
            {
                "model": self.model,
                "created_at": timestamp(),
                "response": "",
                "done": True,
                "done_reason": self.reply.done_reason,
                "context": list(range(1, min(prompt + evals, 16) + 1)),
                **self.metrics(t),
            }
        ]

    def whole(self, t: Timing) -> dict[str, Any]:
        content, thinking = self.text_and_thinking()
        final = self.final(t)[0]
        final["response"] = content
        if thinking:
            final["thinking"] = thinking
        return final


class OpenAI(Format):
    content_type = "text/event-stream"
    stream_default = False
    speaks_tools = True

    def __init__(self, model: str, body: dict[str, Any], reply: Reply) -> None:
        super().__init__(model, body, reply)
        # Ollama's /v1 sends thinking as `reasoning` beside `content`, never inline.
        self.think_field = bool(reply.thinking)
        self.id = "chatcmpl-" + hashlib.sha1(f"{time.time_ns()}".encode()).hexdigest()[:8]
        self.created = int(time.time())
        self.opened_calls: set[int] = set()

    @staticmethod
    def error_body(message: str, status: int = 500) -> dict[str, Any]:
        kind = {404: "not_found_error", 400: "invalid_request_error"}.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def failed_midstream(self) -> list[str]:
        """How Ollama's /v1 ends a generation that failed mid-stream: an empty chunk, and no [DONE]."""
        delta = {"role": "assistant", "content": ""}
        empty = self._envelope("chat.completion.chunk", [{"index": 0, "delta": delta, "finish_reason": None}])
        return [self.line(empty)]

    def line_raw(self, text: str) -> str:
        return f"data: {text}\n\n"

    def end(self) -> str:
        return "data: [DONE]\n\n"

    def _envelope(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_ollama",
            "choices": choices,
        }

    def _usage(self) -> dict[str, int]:
        prompt, evals = self.counts()
        return {"prompt_tokens": prompt, "completion_tokens": evals, "total_tokens": prompt + evals}

    def finish_reason(self) -> str:
        """ "tool_calls" for an answer that ends in calls, unless it was cut ("length")."""
        r = self.reply
        return "tool_calls" if r.tool_calls and r.done_reason == "stop" else r.done_reason

    def chunk(self, field_name: str, piece: str) -> dict[str, Any] | None:
        delta: dict[str, Any]
        if field_name.startswith("tool:"):
            # Deltas keyed by index: id, type and name with the first fragment, then fragments (tool_shapes.py).
            index = int(field_name.removeprefix("tool:"))
            first = index not in self.opened_calls
            self.opened_calls.add(index)
            call = tool_shapes.openai_delta(self.reply.tool_calls[index], index, self.id, piece, first)
            delta = (
                {"role": "assistant", "content": None, "tool_calls": [call]}
                if first
                else {"tool_calls": [call]}
            )
            return self._envelope(
                "chat.completion.chunk", [{"index": 0, "delta": delta, "finish_reason": None}]
            )
        delta = {"role": "assistant", "content": piece if field_name == "content" else ""}
        if field_name == "thinking":
            delta["reasoning"] = piece
        return self._envelope("chat.completion.chunk", [{"index": 0, "delta": delta, "finish_reason": None}])

    def final(self, t: Timing) -> list[dict[str, Any]]:
        events = [
            self._envelope(
                "chat.completion.chunk",
                [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": self.finish_reason(),
                    }
                ],
            )
        ]
        options = self.body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage") and self.reply.usage:
            events.append({**self._envelope("chat.completion.chunk", []), "usage": self._usage()})
        return events

    def whole(self, t: Timing) -> dict[str, Any]:
        content, thinking = self.text_and_thinking()
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["reasoning"] = thinking
        if self.reply.tool_calls:
            calls = self.reply.tool_calls
            message["tool_calls"] = [
                tool_shapes.openai_call(call, i, self.id) for i, call in enumerate(calls)
            ]
            message["content"] = content or None  # OpenAI's null beside calls
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason()}
        whole = self._envelope("chat.completion", [choice])
        return {**whole, "usage": self._usage()} if self.reply.usage else whole


def dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


def tagged(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def same_model(a: str, b: str) -> bool:
    return tagged(a) == tagged(b)


def timestamp(at: datetime | None = None) -> str:
    return (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")


def details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "fake",
        "families": ["fake"],
        "parameter_size": "7.6B",
        "quantization_level": "Q4_K_M",
    }


def digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def model_entry(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": timestamp(),
        "size": 4_683_087_332,
        "digest": digest(name),
        "details": details(),
    }


def openai_model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "library"}


def default_error(status: int) -> str:
    return RUNNER_CRASHED if status >= 500 else f"FakeOllama: scripted HTTP {status}"


def not_found(model: str) -> str:
    """Ollama's words for a model it does not have."""
    return f"model '{model}' not found, try pulling it first"
