"""Issue 28, point 12: every input bounded and linear. Against a checkout outside /tmp (conftest.py).
The timings (a reply at the cap reviewed in under 10 s) are measured by bench/bench_security.py; here,
the behaviour each bound must keep."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import MAX_CONFIG_BYTES, load_config
from hub.core.errors import ConfigError, RunawayOutput
from hub.core.files import read_capped
from hub.edits.apply import plan_edits
from hub.edits.edit import FileEdit
from hub.edits.policy import Policy
from hub.repo.gitops import content_hash
from hub.review.scan import scan_paths
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest
from hub.workers.ollama import OllamaProvider


def test_a_rule_finding_after_a_long_comment_run_is_still_reported_at_its_line(ground: Any) -> None:
    # The scanned copy blanks runs of comment lines (tree-sitter-python parses them in quadratic time);
    # lines and columns must stay, and the code after them is still scanned.
    comments = "".join(f"# note {i}\n" for i in range(5000))
    code = "import subprocess\n" + comments + "subprocess.run('ls ' + x, shell=True)\n"
    (ground.checkout / "src" / "big.py").write_text(code, encoding="utf-8")

    findings = scan_paths(ground.checkout, ["src/big.py"])

    assert [(f.rule_id, f.line) for f in findings] == [("py-subprocess-shell", 5002)]


def test_a_reply_over_the_cap_is_refused_while_it_streams() -> None:
    with FakeOllama() as fake, OllamaProvider(fake.url, retries=0, backoff=0.01) as provider:
        fake.add_model("m")
        fake.script("m", Reply(text="".join(f"line {i}\n" for i in range(300_000)), chunk_chars=4000))
        request = ChatRequest(model="m", prompt="p", stall_timeout=30, total_timeout=60, max_chars=20_000)

        with pytest.raises(RunawayOutput, match=r"passed 20,000 characters \(limits.max_reply_chars\)"):
            provider.generate(request)


def test_a_link_the_code_made_to_a_huge_file_is_never_read_through(ground: Any) -> None:
    huge = ground.root / "huge.bin"
    with huge.open("wb") as handle:  # sparse: 2 GiB long, nothing on disk
        handle.truncate(2 << 30)
    (ground.checkout / "src" / "app.py").unlink()
    (ground.checkout / "src" / "app.py").symlink_to(huge)
    (ground.checkout / "src" / "zero.py").symlink_to("/dev/zero")

    assert read_capped(ground.checkout / "src" / "app.py") is None
    assert read_capped(ground.checkout / "src" / "zero.py") is None
    empty = ground.root / "empty"
    (empty / "src").mkdir(parents=True)
    for name in ("app.py", "zero.py"):
        (empty / "src" / name).write_bytes(b"")
    names = ["src/app.py", "src/zero.py"]
    assert content_hash(ground.checkout, names) == content_hash(empty, names)  # links count as empty
    assert scan_paths(ground.checkout, ["src/app.py", "src/zero.py"]) == []


def test_a_regular_file_past_the_cap_is_read_only_to_the_cap(ground: Any) -> None:
    big = ground.checkout / "big.txt"
    big.write_bytes(b"x" * 5000)

    assert read_capped(big, limit=1000) == (b"x" * 1000, True)
    assert read_capped(big, limit=9000) == (b"x" * 5000, False)


def test_a_hub_yaml_over_one_megabyte_is_refused_naming_the_file(ground: Any) -> None:
    (ground.checkout / "hub.yaml").write_text("project: p\n" + "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))

    with pytest.raises(ConfigError, match=r"hub\.yaml: over 1,048,576 bytes"):
        load_config(ground.checkout)


@pytest.mark.parametrize("allowed", ["src/app.py", ".", "**", "src", "src/**", "src/*.py"])
@pytest.mark.parametrize("name", ["src/" + "é" * 128 + ".py", "é" * 128, "src/" + "a" * 256 + "/x.py"])
def test_a_256_byte_name_is_refused_cleanly_under_every_policy(ground: Any, allowed: str, name: str) -> None:
    policy = Policy(repo_root=Path(ground.checkout), allowed_paths=(allowed,))

    plan = plan_edits([FileEdit(path=name, content="x = 1\n")], policy)

    assert [r.reason for r in plan.refused] == [
        "a path component is longer than 255 bytes, more than file systems allow"
    ]
    assert not any(len(n.encode()) > 255 for _, _, files in os.walk(ground.checkout) for n in files)


def test_the_hubs_mcp_worker_gets_the_reply_cap_and_cuts_its_stream_there() -> None:
    from hub.workers.worker_tools import chat_request

    assert chat_request("m", "p", {"max_chars": 20_000}).max_chars == 20_000
    assert chat_request("m", "p", {}).max_chars is None
