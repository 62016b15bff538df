"""Issue 38, point 12: every socket something listens on in a folder the sandbox shows is covered,
however large the toolchain folder holding it, and one that appears between two commands is covered at the
next: the kernel's list of bound sockets is read, no folder is walked. Against a checkout outside /tmp."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.phases.acceptance import jail_for, run_command


@contextmanager
def listening(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    try:
        yield
    finally:
        server.close()
        path.unlink(missing_ok=True)


def seen(ground: Any, path: Path) -> str:
    (ground.checkout / "hub.yaml").write_text("project: p\n", encoding="utf-8")
    jail = jail_for(load_config(ground.checkout), ground.checkout)
    return run_command(f"test -S {path} && echo SOCKET; echo done", ground.checkout, 60, jail).stdout


def test_a_socket_past_twenty_thousand_entries_of_a_toolchain_is_covered(ground: Any) -> None:
    lib = ground.home / ".local" / "lib"
    many = lib / "aaa-many"
    many.mkdir(parents=True)
    for i in range(21_000):
        (many / f"f{i}").touch()
    with listening(lib / "zzz" / "deep" / "agent.sock"):
        assert seen(ground, lib / "zzz" / "deep" / "agent.sock") == "done\n"


def test_a_socket_made_after_the_first_scan_is_covered_at_the_next_command(ground: Any) -> None:
    lib = ground.home / ".local" / "lib"
    (lib / "pkg" / "sub").mkdir(parents=True)
    assert seen(ground, lib / "pkg" / "sub" / "late.sock") == "done\n"

    with listening(lib / "pkg" / "sub" / "late.sock"):
        assert seen(ground, lib / "pkg" / "sub" / "late.sock") == "done\n"
    with listening(lib / "pkg" / "new" / "later.sock"):
        assert seen(ground, lib / "pkg" / "new" / "later.sock") == "done\n"
