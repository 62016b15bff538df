"""`hub board`'s guard, with a plain HTTP client: the token, the Host and the Origin decide what is
served, and a refused action changes nothing. The board runs in-process on a free port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from hub.core.errors import ConfigError
from hub.faces.board import BoardServer, make_server, serve
from hub.phases.context import Context
from hub.phases.halts import NOTE_PLACEHOLDER
from hub.state.breakers import Trip
from hub.state.store import load
from hub.state.triggers import Trigger

if TYPE_CHECKING:
    from conftest import TaskDriver


@pytest.fixture
def board(ctx: Context) -> Iterator[tuple[BoardServer, str]]:
    server, url = make_server(ctx, "127.0.0.1", 0, None, [])
    thread = threading.Thread(target=serve, args=(server,), daemon=True)
    thread.start()
    yield server, url
    server.shutdown()
    thread.join(timeout=10)


def halted_task(ctx: Context, task: TaskDriver) -> str:
    task_id = task.new()
    bound = type(task)(ctx.for_task(task_id))
    bound.setup()
    bound.run().halt(Trip(Trigger.CRITICAL_FLAW, "the change deletes the tests", {}))
    return task_id


def test_board_serves_its_pages_with_the_token_only(board: tuple[BoardServer, str]) -> None:
    server, url = board
    base, _, token = url.partition("/?token=")
    assert httpx.get(url).status_code == 200
    assert httpx.get(f"{base}/live?token={token}").json()["key"] == "index"
    for bad in (f"{base}/", f"{base}/?token=", f"{base}/?token={token}x", f"{base}/live?token=nope"):
        answer = httpx.get(bad)
        assert answer.status_code == 401, bad
        assert "token" in answer.text and token not in answer.text
    assert server.board.refused == 4


def test_board_refuses_a_request_naming_another_host(board: tuple[BoardServer, str]) -> None:
    server, url = board
    port = server.server_address[1]
    assert httpx.get(url, headers={"Host": f"evil.example:{port}"}).status_code == 403
    assert httpx.get(url, headers={"Host": "evil.example"}).status_code == 403
    assert httpx.get(url, headers={"Host": f"localhost:{port}"}).status_code == 200


def test_board_refuses_another_sites_page_and_a_post_without_origin(
    ctx: Context, task: TaskDriver, board: tuple[BoardServer, str]
) -> None:
    server, url = board
    base, _, token = url.partition("/?token=")
    task_id = halted_task(ctx, task)
    action = f"{base}/task/{task_id}/resume?token={token}"
    form = {"to": "pending_implementer", "note": "the tests are back"}
    assert httpx.get(url, headers={"Origin": "http://evil.example"}).status_code == 403
    assert httpx.post(action, data=form, headers={"Origin": "http://evil.example"}).status_code == 403
    assert httpx.post(action, data=form).status_code == 403  # no Origin
    assert httpx.post(action, data=form, headers={"Origin": "null"}).status_code == 403
    assert httpx.post(action.replace(token, "wrong"), data=form, headers={"Origin": base}).status_code == 401
    assert load(ctx.for_task(task_id).handoff.contract)["status"] == "erik_consultation"

    done = httpx.post(action, data=form, headers={"Origin": base})

    assert done.status_code == 303
    assert done.headers["Location"].startswith(f"/task/{task_id}?")
    contract = load(ctx.for_task(task_id).handoff.contract)
    assert contract["status"] == "pending_implementer"
    assert server.board.refused == 5


def test_board_action_refused_by_the_cli_code_shows_its_message_and_changes_nothing(
    ctx: Context, task: TaskDriver, board: tuple[BoardServer, str]
) -> None:
    _, url = board
    base, _, token = url.partition("/?token=")
    task_id = halted_task(ctx, task)

    answer = httpx.post(
        f"{base}/task/{task_id}/resume?token={token}",
        data={"to": "pending_implementer", "note": NOTE_PLACEHOLDER},
        headers={"Origin": base},
    )

    assert answer.status_code == 409
    assert "placeholder" in answer.text
    assert load(ctx.for_task(task_id).handoff.contract)["status"] == "erik_consultation"


def test_board_refuses_a_short_token(ctx: Context) -> None:
    with pytest.raises(ConfigError, match="token"):
        make_server(ctx, "127.0.0.1", 0, "short", [])


def test_a_form_with_a_bad_length_is_a_message_not_a_traceback(board: tuple[BoardServer, str]) -> None:
    import socket

    server, url = board
    base, _, token = url.partition("/?token=")
    port = server.server_address[1]
    request = (
        f"POST /task/t-1/resume?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {base}\r\n"
        "Content-Length: lots\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request.encode())
        answer = conn.makefile("rb").read().decode()

    assert answer.startswith("HTTP/1.1 409")
    assert "Content-Length" in answer and "not a number" in answer
