"""`hub-standin --port N --script FILE` (or `python -m hub.testing ...`): serve a scripted FakeOllama until
SIGTERM or SIGINT, the stand-in model of README's "No GPU yet"."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from hub.testing.fake_ollama import FakeOllama
from hub.testing.replies import Reply, load_script

SCRIPT_HELP = """\
the script (YAML or JSON):
  models:
    MODEL:            # the model name a role asks for (hub.yaml roles.<role>.model)
      - REPLY         # the replies, in order, one per call (past the last: HTTP 500, a broken server)
      - REPLY
    OTHER-MODEL:
      repeat: REPLY   # or one reply for every call

A REPLY is the answer's text, or a mapping {text: ..., first_token_delay: s, chunk_delay: s,
eval_count: n, status: 500, ...} (the fields of hub.testing.Reply: delays and faults to inject).
The implementer answers with the whole file, its path on the line before the code fence; the local
reviewer with {"passed": true, "critical": false, "issues": []}. README.md, "No GPU yet", has a
whole example.
"""


def _always(reply: Reply) -> Callable[[dict[str, Any]], Reply]:
    return lambda _body: reply


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hub-standin",
        description="Serve a scripted fake Ollama: a stand-in model that answers from a script.",
        epilog=SCRIPT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed at start)")
    parser.add_argument("--script", help="JSON or YAML: {models: {name: [reply, ...] | {repeat: reply}}}")
    parser.add_argument(
        "--prompt-cache",
        action="store_true",
        help="count in prompt_eval_count only what follows the start a prompt shares with the model's last "
        "one, as Ollama's prompt cache does",
    )
    args = parser.parse_args(argv)

    fake = FakeOllama(host=args.host, port=args.port, prompt_cache=args.prompt_cache)
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as f:
                script = load_script(f.read())
        except (OSError, ValueError, TypeError) as exc:
            print(f"hub-standin: {args.script}: {exc}", file=sys.stderr)
            return 2
        for name, replies in script.items():
            if isinstance(replies, Reply):
                fake.respond_with(name, _always(replies))
            else:
                fake.script(name, *replies)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        fake.start()
    except OSError as exc:  # a busy port, or a host that is not this machine's
        print(
            f"hub-standin: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; fix: pick another "
            "--port (0 takes a free one), or stop what holds it",
            file=sys.stderr,
        )
        return 1
    try:
        print(f"FakeOllama listening on {fake.url}", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
