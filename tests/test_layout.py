"""The folders show the architecture: every import points down the floors, no package holds a circle,
no module grows past 600 lines, and the top of `hub/` holds packages, not modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HUB = Path(__file__).resolve().parents[1] / "hub"
GENERATED = {"_validate_contract.py", "_validate_judge.py"}
MAX_LINES = 600


def test_every_import_points_down_and_no_package_holds_a_circle() -> None:
    # pyproject.toml's [tool.importlinter] holds the floors; lint-imports reads it from the project root.
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=HUB.parent, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(HUB)): n
        for path in HUB.rglob("*.py")
        if path.name not in GENERATED
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_top_of_hub_holds_packages_not_modules() -> None:
    modules = sorted(p.name for p in HUB.glob("*.py"))
    assert modules == ["__init__.py", "__main__.py"]
    for package in (p for p in HUB.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        doc = (package / "__init__.py").read_text(encoding="utf-8")
        assert doc.startswith('"""'), f"{package.name}/__init__.py says what the package does"
