#!/usr/bin/env bash
# A bounded load test of minfer-server on loopback: starts the server on a free port with the
# flags before "--", runs minfer-server-load with the flags after it, stops the server, exits
# with the load test's status (0: no unexpected status, every KV block free, RSS steady).
#   scripts/server_load.sh [server flags...] -- [minfer-server-load flags...]
#   scripts/server_load.sh -np 8 -c 16384 -- -C 32 -R 25               # CPU, the default model
#   MINFER_BIN=.dev/bin scripts/server_load.sh -m 7b-q4km.gguf --device cuda -np 16 -c 12288 -- \
#     -C 16 -R 8 --prompt-tokens 512 --max-tokens 128 --stream 1 --disconnect 0 --malformed 0
# MINFER_BIN: where minfer-server and minfer-server-load are (default: build/bin). The server's
# log (with one access-log line per request) is kept in $SERVER_LOG (default: a temp file) and
# its tail printed when the run fails.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${MINFER_BIN:-build/bin}
server_args=()
load_args=()
after=0
for a in "$@"; do
  if [[ $after == 0 && $a == -- ]]; then after=1; continue; fi
  if [[ $after == 0 ]]; then server_args+=("$a"); else load_args+=("$a"); fi
done
log=${SERVER_LOG:-$(mktemp /tmp/minfer-server-XXXXXX.log)}
"$bin/minfer-server" --port 0 "${server_args[@]}" 2>"$log" &
pid=$!
stop() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null
  fi
}
trap stop EXIT
trap 'stop; exit 143' INT TERM
port=""
for _ in $(seq 1 1200); do  # the model loads first (a 7B takes a while)
  port=$(grep -oP 'listening on http://[^ ]+:\K[0-9]+' "$log" | head -1 || true)
  [[ -n $port ]] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "server_load: minfer-server exited before listening:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.25
done
[[ -n $port ]] || { echo "server_load: minfer-server did not start listening in 300 s" >&2; exit 1; }
grep -m1 'listening on' "$log"
echo "command: minfer-server ${server_args[*]} / minfer-server-load ${load_args[*]}"
"$bin/minfer-server-load" --port "$port" "${load_args[@]}"
rc=$?
# Where the engine thread's time went (/metrics: the step phases, forward passes, tokens).
if exec 3<>"/dev/tcp/127.0.0.1/$port"; then
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  grep -E '^minfer:(engine_seconds_total|busy_seconds_total|steps_total|generated_tokens_total|prompt_tokens_total)' <&3
  exec 3<&-
fi
if [[ $rc != 0 ]]; then
  echo "server_load: the load test failed; the server log ($log) ends with:" >&2
  tail -n 20 "$log" >&2
fi
stop
if ! grep -q 'stopping' "$log"; then
  echo "server_load: the server did not stop cleanly" >&2
  tail -n 5 "$log" >&2
  rc=1
fi
exit $rc
