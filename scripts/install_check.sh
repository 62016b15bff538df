#!/usr/bin/env bash
# Install agent-hub the way a user does, into throwaway homes, and drive a whole task with the installed
# `hub` (outside the clone, with a bare PATH) against FakeOllama:
#   pipx install .    pipx install "git+file://<clone>@<branch>"    a plain venv (no pipx)    uv tool install .
#
#   scripts/install_check.sh            # `make install-check`; PIPX=... UV=... to pick the tools
#
# Where pipx is not installed, it goes into a virtualenv of its own in the throwaway folder: README's
# `sudo apt install pipx` needs root, and a current Debian/Ubuntu refuses `pip install --user` (PEP 668).
#
# Each route must end with `hub` and `hub-standin` on the PATH of a new login shell in the throwaway home
# (Debian's /etc/skel dot files, then README's PATH step: `python3 -m pipx ensurepath`, or nothing more
# than ~/.local/bin existing). Checks that the prompts and the packaged rules are read from the wheel (not from the clone), that the
# ast-grep binary beside the hub's Python is found, that `hub init`, `hub doctor` and `hub rules scan`
# run, and that a task goes new -> setup -> implementer -> local review -> PASS -> merged.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
pipx=${PIPX:-$(command -v pipx || true)}
uv=${UV:-$(command -v uv || true)}
python=${PYTHON3:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/hub-install-check.XXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
if [ -z "$pipx" ]; then
    echo "== pipx: not installed; into a virtualenv of its own, $work/pipx-venv"
    "$python" -m venv "$work/pipx-venv"
    "$work/pipx-venv/bin/pip" install --quiet pipx
    pipx="$work/pipx-venv/bin/pipx"
fi
pipx_python=$(head -1 "$pipx" | sed 's/^#!//' | cut -d' ' -f1)  # `python3 -m pipx` of README's line
branch=$(git -C "$src" rev-parse --abbrev-ref HEAD)
mkdir -p "$work/home"
for dot in .profile .bashrc; do  # a new user's home, as Debian and Ubuntu make it
    if [ -f "/etc/skel/$dot" ]; then cp "/etc/skel/$dot" "$work/home/"; fi
done

# `setsid -w`: an interactive shell (on_path's login shell; `pipx ensurepath`'s `bash -i -c 'echo $PATH'`)
# takes the terminal's foreground; from a background job (`make install-check &`, a runner with a pty) it
# was stopped by SIGTTIN and the check waited for good. In a session of its own it has no terminal to take.
on_path() {  # $1 label, $2 folder the commands must come from: what a new login shell finds
    local found
    found=$(env -i HOME="$work/home" TERM=dumb PATH=/usr/bin:/bin setsid -w bash -lic \
        'command -v hub; command -v hub-standin' 2>/dev/null </dev/null)
    if [ "$found" != "$(printf '%s\n%s' "$2/hub" "$2/hub-standin")" ]; then
        echo "install_check: $1: a new shell does not find hub and hub-standin in $2 (found: ${found:-nothing})" >&2
        exit 1
    fi
    echo "$1: a new shell finds hub and hub-standin in $2"
}

smoke() {  # $1 label, $2 folder holding the installed hub
    local bin=$2 py repo
    echo "== $1: $bin/hub"
    "$bin/hub" --version
    py=$(head -1 "$bin/hub" | sed 's/^#!//' | cut -d' ' -f1)
    # The stand-in model came along, beside the hub (README's "No GPU yet" runs it by that name next).
    "$bin/hub-standin" --help | grep -q "the script (YAML or JSON)"
    "$py" - <<'PY'
import hub.core.templates, hub.review.rules
prompts, rules = hub.core.templates.packaged_dir("prompts"), hub.review.rules.packaged_rules_dir()
assert "site-packages" in str(prompts) and (prompts / "implementer.md").is_file(), prompts
assert "site-packages" in str(rules) and any(rules.glob("*.yml")), rules
print("data from the wheel:", prompts.parent, "| ast-grep:", hub.review.rules.find_ast_grep())
PY
    repo="$work/repo-$1"
    mkdir "$repo" && cd "$repo"
    git init -q -b main && git config user.email check@example.invalid && git config user.name check
    printf 'def add(a, b):\n    return a + b\n' > calc.py && git add -A && git commit -qm init
    local run=(env -i HOME="$work/home" PATH="$bin:/usr/bin:/bin" OLLAMA_HOST="$fake_url" HUB_LOG_LEVEL=WARNING)
    "${run[@]}" hub init >/dev/null && git add hub.yaml && git commit -qm hub
    "${run[@]}" hub doctor >/dev/null || true  # FakeOllama lacks the default model: doctor says so
    "${run[@]}" hub rules scan calc.py >/dev/null
    "${run[@]}" hub rules search eval | grep -q py-eval-exec  # the catalog and the packaged rules
    "${run[@]}" hub new --title "Add sub" --requirement "sub(a, b) returns a - b" --target calc.py >/dev/null
    for _ in 1 2 3; do "${run[@]}" hub next >/dev/null; done  # setup-task, implementer, local review
    local task_dir
    for task_dir in _handoff/tasks/*/; do  # the one task's folder
        echo '{"verdict": "PASS", "blocking_issues": []}' > "$task_dir/JUDGE_REPORT.json"
    done
    "${run[@]}" hub next >/dev/null && "${run[@]}" hub next >/dev/null  # report-judge, finalize-task
    git show main:calc.py | grep -q "def sub" || { echo "$1: the task did not merge" >&2; exit 1; }
    echo "$1: a whole task merged with the installed hub"
    cd "$work"
}

# FakeOllama, from the clone's own environment, answers as both the implementer and the reviewer.
impl='calc.py\n```python\ndef add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n```\n'
review='```json\n{\"passed\": true, \"critical\": false, \"issues\": []}\n```'
pair="\"$impl\", \"$review\""
# One implementer's and one reviewer's reply per route: pipx, pipx from git, plain venv, uv.
echo "{\"models\": {\"qwen2.5-coder:7b\": [$pair, $pair, $pair, $pair]}}" > script.json
"$src/.venv/bin/python" -m hub.testing --script script.json > fake.out 2>&1 &
fake_pid=$!
trap 'kill $fake_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q listening fake.out && break; sleep 0.1; done
fake_url=$(sed -n 's/.*listening on //p' fake.out)
[ -n "$fake_url" ] || { cat fake.out >&2; echo "install_check: FakeOllama did not start (make install first)" >&2; exit 1; }

took() {  # $1 label: the seconds since the last route ended (its install, PATH check and task)
    echo "== $1: passed in $((SECONDS - route_start)) s"
    route_start=$SECONDS
}

quietly() {  # run an install quietly, but show its output and say which failed when it does
    "$@" </dev/null > "$work/install.log" 2>&1 || { cat "$work/install.log" >&2; echo "install_check: failed: $*" >&2; exit 1; }
}

export PIPX_HOME=$work/pipx PIPX_BIN_DIR=$work/pipx-bin PIPX_MAN_DIR=$work/pipx-man
route_start=$SECONDS
quietly "$pipx" install "$src"
quietly env HOME="$work/home" SHELL=/bin/bash setsid -w "$pipx_python" -m pipx ensurepath
on_path pipx "$work/pipx-bin"
smoke pipx "$work/pipx-bin"
took pipx
quietly "$pipx" uninstall agent-hub
quietly "$pipx" install "git+file://$src@$branch"
smoke pipx-git "$work/pipx-bin"
took pipx-git
quietly "$pipx" uninstall agent-hub
# Without pipx, README's three lines: a venv of its own, hub and hub-standin linked into ~/.local/bin.
(
    export HOME="$work/home"
    quietly "$python" -m venv ~/.local/share/agent-hub
    quietly ~/.local/share/agent-hub/bin/pip install "$src"
    mkdir -p ~/.local/bin && ln -sf ~/.local/share/agent-hub/bin/hub ~/.local/share/agent-hub/bin/hub-standin ~/.local/bin/
)
on_path venv "$work/home/.local/bin"
smoke venv "$work/home/.local/bin"
took venv
if [ -n "$uv" ]; then
    quietly env UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/uv-bin" UV_CACHE_DIR="$work/uv-cache" \
        "$uv" tool install "$src"
    [ -x "$work/uv-bin/hub-standin" ] || { echo "install_check: uv: no hub-standin in $work/uv-bin" >&2; exit 1; }
    smoke uv "$work/uv-bin"
    took uv
else
    echo "== uv: not installed, skipped"
fi
echo "install_check: all passed"
