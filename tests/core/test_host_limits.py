"""hub.core.host_limits: the machine's own limits in one line naming the file and what to do."""

from __future__ import annotations

import errno
from pathlib import Path

from hub.core.host_limits import explain


def test_a_full_disk_names_the_file_the_free_space_and_where(tmp_path: Path) -> None:
    target = tmp_path / "_handoff" / "STATUS.md"
    said = explain(OSError(errno.ENOSPC, "No space left on device", str(target)))
    assert said.startswith(f"no space left on the device writing {target} (")
    assert f"MB free on the file system holding {target}" in said and "\n" not in said


def test_a_read_only_folder_and_a_missing_git_say_what_to_do(tmp_path: Path) -> None:
    assert "is on a read-only file system: make it writable" in explain(
        OSError(errno.EROFS, "Read-only file system", str(tmp_path / "x"))
    )
    assert "not writable by this user" in explain(PermissionError(errno.EACCES, "Permission denied", "/x"))
    assert explain(FileNotFoundError(errno.ENOENT, "No such file or directory", "git")).startswith(
        "git is not installed or not on PATH"
    )
