"""The side doors of issue 38, each class counted (bench_security.py prints them): limit escapes, forged
passes, test edits, tool files under a broad policy, encoded tokens, the socket scan's cost, and MCP over
HTTP with 1,024 connections held (clients served with the caps and without).

Every probe runs the hub's own code on a checkout outside /tmp: commands through `run_command` in the real
sandbox, edits through `apply_edits` and the one path matcher, text through the redactor. Goal: 0 of each.
"""

from __future__ import annotations

import base64
import contextlib
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.core.redaction import redactor
from hub.core.relpaths import refusal
from hub.core.sandbox_config import SandboxSettings
from hub.edits.apply import apply_edits
from hub.edits.edit import FileEdit, SearchReplace
from hub.edits.policy import Policy
from hub.phases.acceptance import CommandResult, jail_for, run_command
from hub.review.scan import is_blocking, scan_paths
from hub.safety.sandbox import prepare

PY = shlex.quote(sys.executable)
FAILING = "def test_add():\n    assert 1 + 1 == 3\n"
COMMANDS = ("python -m pytest -q tests/test_calc.py",)
TOOL_FILES = [
    ".vscode/tasks.json", ".vscode/settings.json", ".devcontainer/devcontainer.json", ".devcontainer/setup.sh",
    ".gitlab-ci.yml", ".github/workflows/ci.yml", ".github/actions/a/action.yml", ".circleci/config.yml",
    ".envrc", ".lfsconfig", ".gitattributes", ".gitmodules", ".pre-commit-config.yaml", ".husky/pre-commit",
    "AGENTS.md", "CLAUDE.md", "src/CLAUDE.md", "GEMINI.md", ".cursor/rules/x.mdc", ".claude/settings.json",
    ".aider.conf.yml", ".idea/workspace.xml", "Jenkinsfile", "azure-pipelines.yml",
]  # fmt: skip


def _run(checkout: Path, command: str, limits: str = "") -> CommandResult:
    (checkout / "hub.yaml").write_text(f"project: p\n{limits}", encoding="utf-8")
    return run_command(command, checkout, 120, jail_for(load_config(checkout), checkout))


def _write(checkout: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text(text, encoding="utf-8")


def limit_escapes(checkout: Path) -> dict[str, bool]:
    """Each way around sandbox.limits: True where it escaped."""
    memfd = (
        "import os, time\nfd = os.memfd_create('hog')\n"
        "for i in range(40):\n    os.write(fd, b'y' * (8 << 20)); time.sleep(0.02)\ntime.sleep(60)"
    )
    dot_git = (
        "import os, time\nos.makedirs('deep/.git', exist_ok=True)\n"
        "for i in range(40):\n    open(f'deep/.git/b{i}', 'wb').write(b'x' * (1 << 20))\ntime.sleep(60)"
    )
    nested = _run(checkout, "unshare -U true && echo ESCAPED; unshare -Urp --fork true && echo ESCAPED; true")
    root = _run(checkout, "head -c 1000000 /dev/zero > /hog && echo ESCAPED; true")
    held = _run(checkout, f"{PY} -c {shlex.quote(memfd)}", "sandbox:\n  limits: {memory_mb: 64}\n")
    git = _run(checkout, f"{PY} -c {shlex.quote(dot_git)}", "sandbox:\n  limits: {disk_mb: 16}\n")
    return {
        "nested user/PID namespace": "ESCAPED" in nested.stdout,
        "writable root tmpfs": "ESCAPED" in root.stdout,
        "memory held in a memfd": not (held.failure or "").startswith("resource_limit"),
        "a folder named .git": not (git.failure or "").startswith("resource_limit")
        or any((checkout / "deep" / ".git").glob("b*")),
    }


def forged_passes(checkout: Path) -> dict[str, bool]:
    """Each way a failing suite tried to pass: True where the acceptance command passed and the static
    gate did not halt on the change either."""
    exit_early = "import os\n" + FAILING + "os._exit(0)\n"
    forger = (
        "import os, re\ndef test_forge():\n"
        "    fd = re.search(r'/dev/fd/(\\d+)', os.environ['PYTEST_ADDOPTS']).group(1)\n"
        '    os.write(int(fd), b\'<?xml version="1.0"?><testsuites><testsuite tests="9" failures="0"/></testsuites>\')\n'
    )
    write_and_exit = forger.replace("</testsuites>')\n", "</testsuites>'); os._exit(0)\n")
    cases = {
        "report forged beside pytest's own": ({"tests/test_calc.py": FAILING, "tests/test_forge.py": forger}, f"{PY} -m pytest -q tests; exit 0"),
        "report written, then os._exit(0)": ({"tests/test_calc.py": FAILING, "tests/test_forge.py": write_and_exit}, f"{PY} -m pytest -q tests"),
        "pytest behind make test, os._exit(0)": ({"Makefile": f"test:\n\t{sys.executable} -m pytest -q tests\n", "tests/test_calc.py": exit_early}, "make test"),
        "python -m unittest, os._exit(0)": ({"test_u.py": "import os, unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        os._exit(0)\n"}, f"{PY} -m unittest test_u"),
        "pytest, os._exit(0) at import": ({"tests/test_calc.py": exit_early}, f"{PY} -m pytest -q tests"),
    }  # fmt: skip
    found = {}
    for name, (files, command) in cases.items():
        _write(checkout, files)
        passed = _run(checkout, command).ok
        gate = [f for f in scan_paths(checkout, list(files)) if is_blocking(f)]
        found[name] = passed and not gate
        for rel in files:
            (checkout / rel).unlink()
    return found


def test_edits(checkout: Path) -> dict[str, bool]:
    """A SEARCH/REPLACE on the failing test and a new conftest.py under allowed_paths '.': True where written."""
    _write(checkout, {"tests/test_calc.py": FAILING})
    edits = [
        FileEdit("tests/test_calc.py", blocks=(SearchReplace("1 + 1 == 3", "1 + 1 == 2"),)),
        FileEdit("tests/conftest.py", content="collect_ignore = ['test_calc.py']\n"),
        FileEdit("conftest.py", content="import pytest\n"),
    ]
    result = apply_edits(edits, Policy(checkout, (".",), acceptance_commands=COMMANDS))
    written = {r.path for r in result.refused}
    found = {edit.path: edit.path not in written for edit in edits}
    (checkout / "tests" / "test_calc.py").unlink()
    return found


def tool_files() -> dict[str, bool]:
    """The 24 tool files under allowed_paths '.': True where the one matcher lets a task write it."""
    return {path: refusal(path, (".",)) is None for path in TOOL_FILES}


def encoded_tokens(checkout: Path, token: str) -> dict[str, bool]:
    """A token the hub knows (the remote URL's), spelled as code could print it: True where it survived."""
    raw = token.encode()
    spellings = {
        "hex": raw.hex(),
        "base64": base64.b64encode(raw).decode(),
        "base64, shifted": base64.b64encode(b"x" + raw).decode(),
        "url-safe base64, shifted": base64.urlsafe_b64encode(b"xy" + raw).decode(),
        "two halves": f"{token[: len(token) // 2]}\n{token[len(token) // 2 :]}",
        "three pieces": " ".join(token[i : i + 13] for i in range(0, len(token), 13)),
    }
    secrets = redactor(folders=[checkout])
    return {how: not secrets.known_in(text) for how, text in spellings.items()}


def false_redactions(folder: Path, evals: Path) -> dict[str, int]:
    """Real pytest output of the repository's exercises against wrong solutions: lines the redactor changed."""
    import re

    for test in evals.glob("*/*_test.py"):
        (folder / test.name).write_text(test.read_text(encoding="utf-8"), encoding="utf-8")
        for module, names in re.findall(r"^from (\w+) import (.+)$", test.read_text(encoding="utf-8"), re.M):
            stubs = [f"def {n.strip()}(*args):\n    return 0\n" for n in names.split(",")]
            (folder / f"{module}.py").write_text("\n".join(stubs), encoding="utf-8")
    name = "SumOfMultiplesTest.test_solutions_using_include_exclude_must_extend_to_cardinality_greater_than_3"
    cls, method = name.split(".")
    (folder / "sum_of_multiples_test.py").write_text(
        f"import unittest\nclass {cls}(unittest.TestCase):\n    def {method}(self):\n        self.assertEqual(1, 2)\n",
        encoding="utf-8",
    )
    output = "\n".join(
        subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options], cwd=folder,
            capture_output=True, text=True, timeout=300,
        ).stdout
        for options in ([], ["-v", "--tb=short"])
    )  # fmt: skip
    redacted = redactor(env={}).redact(output)
    changed = sum(a != b for a, b in zip(output.splitlines(), redacted.splitlines(), strict=True))
    return {"lines": len(output.splitlines()), "falsely_redacted": changed}


def scan_cost(checkout: Path, runs: int) -> dict[str, float]:
    """prepare() (mounts and socket scan, once a phase): the first in the process, then the median."""
    started = time.perf_counter()
    prepare(SandboxSettings(), checkout, [checkout / ".git"])
    first = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        prepare(SandboxSettings(), checkout, [checkout / ".git"])
        times.append((time.perf_counter() - started) * 1000)
    return {"first_ms": first, "median_ms": statistics.median(times)}


def _initialize(url: str, source: str) -> bool:
    """An MCP client's first call from a fresh connection at `source`, answered 200 within 10 s?"""
    import httpx

    body = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
    }  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Connection": "close"}
    try:
        with httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=10) as http:
            return http.post(url, json=body, headers=headers).status_code == 200
    except httpx.HTTPError:
        return False


def connection_flood(checkout: Path, held: int = 1024, caps: tuple[str, ...] = ()) -> dict[str, Any]:
    """`hub mcp serve --transport http` at the usual descriptor limit (1,024), one client holding `held`
    idle connections: are two MCP clients (the same address, another one) still served?"""
    import resource
    import socket

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, held + 256)), hard))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "hub", "--repo", str(checkout), "mcp", "serve", "--transport", "http"]
    server = subprocess.Popen(
        [*argv, "--port", str(port), "--idle-timeout", "120", *caps],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)),
    )  # fmt: skip
    conns: list[socket.socket] = []
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "Uvicorn running on" in line:
                break
        for _ in range(held):
            with contextlib.suppress(OSError):
                conns.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        url = f"http://127.0.0.1:{port}/mcp"
        served = [_initialize(url, source) for source in ("127.0.0.1", "127.0.0.2")]
        return {
            "held": len(conns),
            "served": sum(served),
            "clients": len(served),
            "alive": server.poll() is None,
        }
    finally:
        for conn in conns:
            conn.close()
        server.terminate()
        server.wait(timeout=30)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def side_doors(checkout: Path, token: str, evals: Path, scratch: Path, runs: int) -> dict[str, Any]:
    scratch.mkdir(parents=True, exist_ok=True)
    return {
        "connection_flood": {
            "uncapped": connection_flood(
                checkout, caps=("--max-per-client", "9999", "--max-connections", "9999")
            ),
            "capped": connection_flood(checkout),
        },
        "scan_cost": scan_cost(checkout, runs),
        "limit_escapes": limit_escapes(checkout),
        "forged_passes": forged_passes(checkout),
        "test_edits_written": test_edits(checkout),
        "tool_files_writable": tool_files(),
        "encoded_tokens_surviving": encoded_tokens(checkout, token),
        "false_redactions": false_redactions(scratch, evals),
    }


def print_side_doors(found: dict[str, Any]) -> None:
    for how, flood in found["connection_flood"].items():
        print(
            f"MCP over HTTP, {flood['held']} connections held ({how}): {flood['served']} of {flood['clients']} "
            f"clients served, server {'alive' if flood['alive'] else 'DEAD'}"
        )
    cost = found["scan_cost"]
    print(
        f"\nprepare (mounts, socket scan): first {cost['first_ms']:.1f} ms, then median {cost['median_ms']:.1f} ms"
    )
    for key in (
        "limit_escapes",
        "forged_passes",
        "test_edits_written",
        "tool_files_writable",
        "encoded_tokens_surviving",
    ):
        cases = found[key]
        bad = [name for name, hit in cases.items() if hit]
        print(f"{key.replace('_', ' ')}: {len(bad)} of {len(cases)} {bad if bad else ''}")
    false = found["false_redactions"]
    print(f"false redactions in real pytest output: {false['falsely_redacted']} of {false['lines']} lines")
