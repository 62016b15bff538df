"""The rules gate and scan_code against running ast-grep directly, on the same files with the same rules.

    .venv/bin/python bench/bench_rules.py [--repeat N] [--quick]

Three measurements, medians in milliseconds:
- the static gate (`scan_paths`) on a handful of changed files in a git repository;
- the gate on a large tree: the CPython standard library (without site-packages) and this project;
- `scan_code` on a 300-line Python file, in process (ast-grep-py) and through the CLI.
Each is set against `ast-grep scan` run directly with an sgconfig.yml listing the same rule dirs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hub.core.log import configure  # noqa: E402
from hub.review import rules  # noqa: E402  (the checkout, not an installed copy)
from hub.review.scan import scan_code, scan_paths  # noqa: E402

CHANGED_MODULES = ("json/decoder.py", "shlex.py", "textwrap.py", "fnmatch.py", "glob.py")


def medians_ms(hub: Callable[[], Any], direct: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median milliseconds of each, sampled in turn so that load from elsewhere hits both alike."""
    hub()  # warm: imports, the rule file cache, the OS file cache
    direct()
    hub_samples, direct_samples = [], []
    for _ in range(repeat):
        for fn, samples in ((hub, hub_samples), (direct, direct_samples)):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return statistics.median(hub_samples) * 1000, statistics.median(direct_samples) * 1000


def direct_scan(config: Path, cwd: Path, targets: Sequence[str]) -> int:
    """`ast-grep scan` as a person would run it; returns the number of findings."""
    done = subprocess.run(
        [rules.ast_grep_binary(), "scan", "-c", str(config), "--json=stream", *targets],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"ast-grep failed: {done.stderr}")
    return sum(1 for line in done.stdout.splitlines() if line.strip())


def packaged_config(folder: Path) -> Path:
    config = folder / "sgconfig.yml"
    config.write_text(f"ruleDirs:\n  - {rules.packaged_rules_dir()}\n", encoding="utf-8")
    return config


def row(name: str, hub_ms: float, direct_ms: float, findings: int) -> dict[str, Any]:
    ratio = hub_ms / direct_ms if direct_ms else float("nan")
    print(
        f"{name:<44} hub {hub_ms:9.1f} ms   ast-grep {direct_ms:9.1f} ms   x{ratio:5.2f}   findings {findings}"
    )
    return {
        "name": name,
        "hub_ms": round(hub_ms, 1),
        "direct_ms": round(direct_ms, 1),
        "ratio": round(ratio, 2),
    }


def bench_changed_files(stdlib: Path, work: Path, repeat: int) -> dict[str, Any]:
    repo = work / "repo"
    for module in CHANGED_MODULES:
        target = repo / "src" / module
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stdlib / module, target)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    changed = [f"src/{m}" for m in CHANGED_MODULES]
    config = packaged_config(work)
    findings = len(scan_paths(repo, changed))
    hub_ms, direct_ms = medians_ms(
        lambda: scan_paths(repo, changed), lambda: direct_scan(config, repo, changed), repeat
    )
    assert direct_scan(config, repo, changed) == findings
    return row(f"gate on {len(changed)} changed files", hub_ms, direct_ms, findings)


def bench_tree(name: str, root: Path, targets: list[str], work: Path, repeat: int) -> dict[str, Any]:
    # Neither tree has an sgconfig.yml, so both sides run exactly the packaged rules.
    config = packaged_config(work)
    findings = len(scan_paths(root, targets))
    hub_ms, direct_ms = medians_ms(
        lambda: scan_paths(root, targets), lambda: direct_scan(config, root, targets), repeat
    )
    return row(name, hub_ms, direct_ms, findings)


def bench_scan_code(stdlib: Path, work: Path, repeat: int) -> list[dict[str, Any]]:
    lines = (stdlib / "subprocess.py").read_text(encoding="utf-8").splitlines()[300:600]
    code = "\n".join(lines) + "\n"
    source = work / "code.py"
    source.write_text(code, encoding="utf-8")
    config = packaged_config(work)
    findings = len(scan_code(code, "python"))

    def direct() -> int:
        return direct_scan(config, work, ["code.py"])

    in_process, direct_ms = medians_ms(lambda: scan_code(code, "python", engine="py"), direct, repeat)
    via_cli, direct_ms2 = medians_ms(lambda: scan_code(code, "python", engine="cli"), direct, repeat)
    return [
        row("scan_code, 300 lines, in process (default)", in_process, direct_ms, findings),
        row("scan_code, 300 lines, through the CLI", via_cli, direct_ms2, findings),
    ]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per small measurement (median)")
    parser.add_argument("--quick", action="store_true", help="skip the standard-library tree")
    args = parser.parse_args(argv)
    configure(level="WARNING")  # the room's debug lines would swamp the table
    stdlib = Path(os.__file__).parent
    print(f"ast-grep {rules.ast_grep_binary()}, {os.cpu_count()} cores, {len(rules.list_rules(REPO))} rules")
    results: dict[str, Any] = {"rows": []}
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        work = Path(tmp)
        results["rows"].append(bench_changed_files(stdlib, work, args.repeat))
        results["rows"].extend(bench_scan_code(stdlib, work, args.repeat * 3))
        results["rows"].append(
            bench_tree("gate on this project", REPO, ["hub", "tests", "bench"], work, args.repeat)
        )
        if not args.quick:
            entries = sorted(
                p.name for p in stdlib.iterdir() if p.name not in ("site-packages", "__pycache__")
            )
            files = sum(
                1 for e in entries for p in [stdlib / e, *(stdlib / e).rglob("*.py")] if p.suffix == ".py"
            )
            results["rows"].append(
                bench_tree(
                    f"gate on the standard library ({files} .py)",
                    stdlib,
                    entries,
                    work,
                    max(3, args.repeat // 2),
                )
            )
    return results


if __name__ == "__main__":
    main()
