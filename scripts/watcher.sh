#!/usr/bin/env bash
# A shell alternative to `hub watch`: run `hub next` whenever _handoff/ changes, and keep running it
# while it makes progress. Uses inotifywait (package inotify-tools) when present, else polls.
#
#   scripts/watcher.sh [REPO]            # HUB=path/to/hub, HUB_WATCH_INTERVAL=seconds (default 30)
#
# SIGINT/SIGTERM: a running `hub next` is allowed to finish (bash runs the trap after it), then the
# loop ends. Ctrl-C in a terminal also reaches `hub next` itself, which then stops mid-phase; the next
# run records that as `interrupted` and carries on.
set -u

repo=${1:-.}
hub=${HUB:-hub}
interval=${HUB_WATCH_INTERVAL:-30}
cd "$repo" || exit 1
handoff=${HUB_HANDOFF_DIR:-_handoff}
mkdir -p "$handoff"

stop=0
waiter=""
said=""
on_signal() {
    stop=1
    if [ -n "$waiter" ]; then kill "$waiter" 2>/dev/null; fi
}
trap on_signal INT TERM

# Run phases until nothing is due (hub next prints "nothing to do: ..." then), the task halts (4),
# another process holds the lock (75), or a phase fails (anything else; retried on the next change).
run_due() {
    local out code
    while [ "$stop" -eq 0 ]; do
        out=$("$hub" next)
        code=$?
        # Say each idle reason once, not every $interval seconds.
        if [ -n "$out" ] && [ "$out" != "$said" ]; then printf '%s\n' "$out"; fi
        said=$out
        case "$code:$out" in
            0:"nothing to do"*) return 0 ;;
            0:*) ;;
            4:*) echo "watcher.sh: the task is halted; see $handoff/ and run hub resume" >&2; return 0 ;;
            *) return 0 ;;
        esac
    done
}

# Wait for a change that can make a phase due, at most $interval seconds. The hub's own bookkeeping
# (lock files, the transition log, runs/, logs/, archive/, temp files) is excluded.
wait_for_change() {
    if command -v inotifywait >/dev/null 2>&1; then
        inotifywait -q -q -t "$interval" -e close_write -e moved_to -e create -e delete \
            --exclude '(/\.[^/]*$|transition\.ndjson|README\.md$)' "$handoff" &
    else
        sleep "$interval" &
    fi
    waiter=$!
    wait "$waiter" 2>/dev/null
    waiter=""
}

echo "watcher.sh: watching $PWD/$handoff (every ${interval}s at least)" >&2
while [ "$stop" -eq 0 ]; do
    run_due
    [ "$stop" -eq 0 ] && wait_for_change
done
echo "watcher.sh: stopped" >&2
