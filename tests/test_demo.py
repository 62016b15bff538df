"""`make demo` tells the story: every step's copyable command, the model's answers, the diff, the state
after each step, the second task's halt file, and where the kept repository is."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).parent.parent / "scripts" / "demo.py"


def test_the_demo_shows_answers_diffs_states_the_halt_file_and_keeps_the_repository() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO), "--keep"], capture_output=True, text=True, timeout=300, check=False
    )
    out = done.stdout
    kept = re.search(r"the demo repository is (\S+);", out)
    try:
        assert done.returncode == 0, done.stderr[-2000:]
        commands = [line[2:] for line in out.splitlines() if line.startswith("$ hub ")]
        assert len(commands) >= 15
        for command in commands:  # copyable: each parses back to the words the demo ran
            assert shlex.split(command)[0] == "hub", command
        assert "--acceptance-command '" in out  # the quoted command survives the echo
        assert "$ git add hub.yaml && git commit -m 'hub: configure'" in out
        assert "committed or not" in out and "needs it committed" not in out  # it need not be (issue 36)
        assert "the implementer's answer" in out and "| def sub(a: float, b: float) -> float:" in out
        assert "git diff main...task/" in out and "+def mul(a: float, b: float) -> float:" in out
        assert "state pending_local_review, attempt 1; next: hub run-local-review" in out
        assert re.search(r"_handoff/tasks/\S+/ERIK_HALT\.md, what a person reads:", out)
        assert "--note '<<REPLACE: " in out and "demo complete: 2 tasks merged" in out
        assert kept is not None and Path(kept.group(1), "calc.py").is_file()
        assert "def mul" in Path(kept.group(1), "calc.py").read_text(encoding="utf-8")
    finally:
        if kept is not None:
            shutil.rmtree(Path(kept.group(1)).parent, ignore_errors=True)
