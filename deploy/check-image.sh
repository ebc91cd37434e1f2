#!/bin/sh
# `npm run check:image`: builds the container image from a clean clone of this repository's HEAD
# and checks what it does when it runs, with podman or Docker (ENGINE=podman|docker to choose;
# podman first). Prints PASS or FAIL per behaviour with its figures, and exits 1 when any
# failed. Not part of `npm test`: a cold build takes minutes.
#
#   deploy/check-image.sh
#   NODE_IMAGE=$(deploy/make-base-image.sh) deploy/check-image.sh   # where no registry answers
#
# The behaviours: the image builds from the clone; it runs as uid 1000, not root; on a read-only
# root filesystem with no tmpfs at all; it refuses to start without a config and with the demo's
# published keys, saying why; --check passes on the test's config; the gateway answers /readyz,
# serves a 429 once a caller's burst is spent, with the state in a real Redis (a redis-server
# this script starts on a free loopback port), /readyz 503 while that Redis is paused (SIGSTOP)
# and 200 once it runs again, and the admin console's files; the image's
# HEALTHCHECK passes; SIGTERM stops it within its grace, exit code 0. Figures: build time,
# image size, start time (run to /readyz 200), stop time.
#
# Needs: git, curl, redis-server and redis-cli on the host, and a Linux host (the containers use
# --network host to reach the Redis on the host's loopback). Uncommitted changes are not in the
# clone: commit first. Everything it starts is removed on exit (containers, Redis, the clone);
# the image stays as $IMAGE, so a second run reuses the build cache.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/deploy/podman-env.sh"
ENGINE=${ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
IMAGE=${IMAGE:-localhost/tollgate:check}
NODE_IMAGE=${NODE_IMAGE:-node:22-slim}
GRACE=${GRACE:-5} # the test config's shutdown_grace, in seconds
STOP_TIMEOUT=$((GRACE + 5))
run_id=tollgate-check-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-image-check.XXXXXX")
failures=0
redis_pid=

for tool in git curl redis-server redis-cli "$ENGINE"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "check-image: $tool is not installed" >&2; exit 2; }
done

cleanup() {
  for c in $($ENGINE ps -a --filter "name=$run_id" --format '{{.Names}}' 2>/dev/null); do
    $ENGINE kill "$c" >/dev/null 2>&1 || true # at once: the upstream one-liner ignores SIGTERM
    $ENGINE rm -f "$c" >/dev/null 2>&1 || true
  done
  # CONT first: interrupted during the /readyz check, the Redis is still stopped (SIGSTOP).
  if [ -n "$redis_pid" ]; then
    kill -CONT "$redis_pid" 2>/dev/null || true
    kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }
pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
# A port nothing listens on now, on 127.0.0.1 (the kernel's pick, released at once). A race,
# accepted here: the containers share the host's network and their ports must be known before
# they start; a port taken meanwhile shows as a FAIL with the gateway's EADDRINUSE in its log.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
# Waits up to $2 seconds for URL $1 to answer 200; prints the status it last got.
wait_200() {
  deadline=$(($(date +%s) + $2))
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1" || true)
    [ "$code" = 200 ] && { echo 200; return 0; }
    [ "$(date +%s)" -ge "$deadline" ] && { echo "$code"; return 1; }
    sleep 0.05
  done
}
# Runs the image with the flags every check uses: host network, read-only root, no tmpfs.
run_image() {
  name=$1
  shift
  readonly_flags="--read-only"
  # podman mounts a tmpfs on /tmp, /run and /var/tmp unless told not to.
  [ "$ENGINE" = podman ] && readonly_flags="--read-only --read-only-tmpfs=false"
  # shellcheck disable=SC2086
  ${limit:+timeout "$limit"} $ENGINE run --name "$run_id-$name" --network host $readonly_flags --cap-drop ALL \
    --security-opt no-new-privileges ${health_flags---no-healthcheck} "$@"
}

# --- build from a clean clone ------------------------------------------------------------------
git -C "$root" diff --quiet HEAD -- 2>/dev/null || echo "note: the working tree has uncommitted changes; the clone builds HEAD ($(git -C "$root" rev-parse --short HEAD))"
git clone -q --no-local "$root" "$work/clone"
git -C "$work/clone" checkout -q "$(git -C "$root" rev-parse HEAD)"
echo "engine: $ENGINE $($ENGINE --version | head -1 | sed 's/.*version //'), base: $NODE_IMAGE, commit: $(git -C "$work/clone" rev-parse --short HEAD)"
build_flags="--network host --build-arg NODE_IMAGE=$NODE_IMAGE"
# podman's default OCI format has no HEALTHCHECK; the Docker format keeps it.
[ "$ENGINE" = podman ] && build_flags="$build_flags --format docker"
t0=$(now_ms)
# shellcheck disable=SC2086
if $ENGINE build $build_flags -t "$IMAGE" "$work/clone" >"$work/build.log" 2>&1; then
  pass "builds from a clean clone in $((($(now_ms) - t0) / 1000)) s"
else
  fail "build (last lines of its log below)"
  tail -20 "$work/build.log"
  exit 1
fi
size=$($ENGINE image inspect --format '{{.Size}}' "$IMAGE")
echo "INFO  image size: $((size / 1000000)) MB ($size bytes)"

# The image must hold what package.json's "files" ships, and no config.
missing=
for path in dist/cli.js dist/admin/healthcheck.js lua/check.lua console/index.html console/app.js console/style.css \
  config/gateway.schema.json deploy/demo-keys.mjs node_modules/ioredis; do
  $ENGINE run --rm --no-healthcheck --entrypoint test "$IMAGE" -e "/app/$path" || missing="$missing $path"
done
# sleep: deploy/kubernetes/deployment.yaml's preStop runs it.
$ENGINE run --rm --no-healthcheck --entrypoint sh "$IMAGE" -c 'command -v sleep' >/dev/null || missing="$missing sleep"
present=$($ENGINE run --rm --no-healthcheck --entrypoint sh "$IMAGE" -c 'ls /app/config/*.yaml /etc/tollgate 2>/dev/null; ls /app/dist/config/docs.* 2>/dev/null' || true)
if [ -z "$missing" ] && [ -z "$present" ]; then pass "holds dist, lua, console, the schema, the production dependencies and sleep; no config, no docs generator"
else fail "contents: missing:${missing:- none}; should not be there: ${present:-none}"; fi

# --- refusals ------------------------------------------------------------------------------------
out=$(limit=60 run_image noconfig --rm "$IMAGE" 2>&1) && code=0 || code=$?
if [ "$code" = 2 ] && echo "$out" | grep -q "no config at /etc/tollgate/gateway.yaml"; then
  pass "without a config: exit 2, \"$(echo "$out" | head -1)\""
else fail "without a config: exit $code, $out"; fi

mkdir -p "$work/demo"
cp "$work/clone/config/gateway.yaml" "$work/demo/gateway.yaml"
chmod -R a+rX "$work"
out=$(limit=60 run_image demo --rm -v "$work/demo:/etc/tollgate:ro" "$IMAGE" 2>&1) && code=0 || code=$?
if [ "$code" != 0 ] && echo "$out" | grep -q "refusing to start" && echo "$out" | grep -q "demo-free, demo-pro" &&
  ! echo "$out" | grep -q "demo-free-key"; then
  pass "with the demo config: exit $code, \"$(echo "$out" | head -1 | cut -c1-110)...\""
else fail "with the demo config: exit $code, $out"; fi

# --- a gateway on a real Redis ---------------------------------------------------------------------
redis_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --daemonize no \
  --logfile "$work/redis.log" &
redis_pid=$!
i=0
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -gt 100 ] && { fail "redis-server did not start on $redis_port"; exit 1; }
  sleep 0.05
done

proxy_port=$(free_port)
admin_port=$(free_port)
upstream_port=$(free_port)
key=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
key_sha=$(printf %s "$key" | sha256sum | cut -d' ' -f1)
token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$work/etc"
cat >"$work/etc/gateway.yaml" <<YAML
listen: 127.0.0.1:$proxy_port
shutdown_grace: ${GRACE}s
log: { level: info, requests: false }
admin: { listen: "127.0.0.1:$admin_port", token: "\${ADMIN_TOKEN}" }
store: { url: "redis://127.0.0.1:$redis_port", prefix: "$run_id:", timeout: 200ms, on_failure: closed }
upstreams: { api: "http://127.0.0.1:$upstream_port" }
identity: { api_key: { header: x-api-key, on_unknown: reject } }
clients:
  - { id: checker, key_sha256: "$key_sha", plan: tiny }
plans:
  anonymous: { global: { rate: 1/s, burst: 5 } }
  tiny: { global: { rate: 1/h, burst: 3 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
YAML
chmod -R a+rX "$work"

# The upstream: a Node one-liner in the same image (nothing else to pull).
$ENGINE run -d --name "$run_id-upstream" --network host --no-healthcheck --entrypoint node "$IMAGE" -e \
  "require('http').createServer((q,s)=>s.end('upstream ok')).listen($upstream_port,'127.0.0.1')" >/dev/null

out=$(run_image check --rm -v "$work/etc:/etc/tollgate:ro" -e ADMIN_TOKEN="$token" "$IMAGE" --check 2>&1) && code=0 || code=$?
if [ "$code" = 0 ]; then pass "--check on the mounted config: exit 0"; else fail "--check: exit $code, $out"; fi

t0=$(now_ms)
# The image's HEALTHCHECK kept, its timer not: podman runs it from systemd timers, which a
# host without systemd lacks (it says so on stderr); `healthcheck run` below runs it once.
health_flags= run_image gw -d -v "$work/etc:/etc/tollgate:ro" -e ADMIN_TOKEN="$token" "$IMAGE" >/dev/null 2>"$work/run.err" ||
  { fail "run: $(cat "$work/run.err")"; exit 1; }
started=$(($(now_ms) - t0))
if code=$(wait_200 "http://127.0.0.1:$admin_port/readyz" 30); then
  pass "answers /readyz 200, $(($(now_ms) - t0)) ms after run (the engine's run returned after $started ms)"
else
  fail "/readyz: last answer $code after 30 s"
  $ENGINE logs "$run_id-gw" 2>&1 | tail -20
fi

running=$($ENGINE inspect --format '{{.State.Running}}' "$run_id-gw")
[ "$running" = true ] || { fail "the gateway is not running; its log:"; $ENGINE logs "$run_id-gw" 2>&1 | tail -20; exit 1; }
uid=$($ENGINE exec "$run_id-gw" id -u || true)
user=$($ENGINE image inspect --format '{{.Config.User}}' "$IMAGE")
pid1=$($ENGINE exec "$run_id-gw" sh -c 'tr "\0" " " </proc/1/cmdline' || true)
if [ "$uid" = 1000 ] && [ "$user" = 1000:1000 ]; then pass "runs as uid $uid (USER $user), PID 1: $pid1"
else fail "user: uid $uid, USER $user"; fi

writable=
for dir in /app /tmp /etc/tollgate /home/node /; do
  $ENGINE exec "$run_id-gw" sh -c "touch $dir/.w" 2>/dev/null && writable="$writable $dir"
done
mounts=$($ENGINE exec "$run_id-gw" sh -c 'grep -c " tmpfs " /proc/mounts' || true)
if [ -z "$writable" ]; then pass "read-only root: nothing writable (/app /tmp /etc/tollgate /home/node /), $mounts tmpfs mounts (the engine's /dev and the like)"
else fail "writable:$writable"; fi

codes=
for _ in 1 2 3 4; do
  codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H "x-api-key: $key" "http://127.0.0.1:$proxy_port/hello")"
done
body=$(curl -s -i -H "x-api-key: $key" "http://127.0.0.1:$proxy_port/hello")
redis_keys=$(redis-cli -p "$redis_port" --scan --pattern "$run_id:*" | wc -l)
if [ "$codes" = " 200 200 200 429" ] && echo "$body" | head -1 | grep -q " 429" &&
  echo "$body" | grep -qi '^content-type: application/problem+json' && [ "$redis_keys" -gt 0 ]; then
  pass "burst 3: answers$codes, the 429 a problem+json; $redis_keys key(s) in Redis on port $redis_port"
else fail "429 through Redis: answers$codes, $redis_keys Redis key(s); $(echo "$body" | head -1)"; fi

# /readyz with the store not answering: 503 (the route fails closed), then 200 again.
kill -STOP "$redis_pid"
i=0 code=
while [ $i -lt 50 ]; do
  code=$(curl -s -o "$work/readyz" -w '%{http_code}' --max-time 2 "http://127.0.0.1:$admin_port/readyz" || true)
  [ "$code" = 503 ] && break
  i=$((i + 1)); sleep 0.1
done
kill -CONT "$redis_pid"
if [ "$code" = 503 ] && again=$(wait_200 "http://127.0.0.1:$admin_port/readyz" 10); then
  pass "/readyz with Redis paused (SIGSTOP): 503, and 200 again once it runs"
else fail "/readyz with Redis paused: $code, then ${again:-no 200}"; fi

code=$(curl -s -o "$work/console.html" -w '%{http_code}' "http://127.0.0.1:$admin_port/admin/ui/")
if [ "$code" = 200 ] && grep -qi "<html" "$work/console.html"; then pass "admin console: GET /admin/ui/ 200 ($(wc -c <"$work/console.html") bytes of HTML)"
else fail "admin console: GET /admin/ui/ $code"; fi

if [ "$ENGINE" = podman ]; then
  hc=$(podman healthcheck run "$run_id-gw" 2>&1) && code=0 || code=$?
else
  # Docker runs it itself, a first time one interval (10 s) after the start.
  i=0 code=1 hc=
  while [ $i -lt 40 ]; do
    hc=$(docker inspect --format '{{.State.Health.Status}}' "$run_id-gw" 2>&1 || true)
    [ "$hc" = healthy ] && { code=0; break; }
    [ "$hc" = unhealthy ] && break
    i=$((i + 1)); sleep 1
  done
fi
hc_cmd=$($ENGINE image inspect --format '{{json .Config.Healthcheck.Test}}' "$IMAGE" 2>/dev/null || true)
case "$hc_cmd" in *healthcheck.js*) has_hc=1 ;; *) has_hc= ;; esac
if [ "$code" = 0 ] && [ -n "$has_hc" ]; then pass "HEALTHCHECK $hc_cmd passes"
else fail "HEALTHCHECK: exit $code ($hc), in the image: ${hc_cmd:-none}"; fi

# SIGTERM with a request in flight: the upstream stalls it for 1 s, the gateway finishes it.
$ENGINE kill "$run_id-upstream" >/dev/null 2>&1 || true
$ENGINE rm -f "$run_id-upstream" >/dev/null
$ENGINE run -d --name "$run_id-upstream" --network host --no-healthcheck --entrypoint node "$IMAGE" -e \
  "require('http').createServer((q,s)=>setTimeout(()=>s.end('slow ok'),1000)).listen($upstream_port,'127.0.0.1')" >/dev/null
sleep 1
curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$proxy_port/slow" >"$work/inflight" 2>/dev/null &
inflight_pid=$!
sleep 0.3
t0=$(now_ms)
$ENGINE stop -t "$STOP_TIMEOUT" "$run_id-gw" >/dev/null 2>>"$work/run.err" || true
stop_ms=$(($(now_ms) - t0))
wait "$inflight_pid" 2>/dev/null || true
inflight=$(cat "$work/inflight")
exit_code=$($ENGINE inspect --format '{{.State.ExitCode}}' "$run_id-gw" || true)
if [ "$exit_code" = 0 ] && [ "$stop_ms" -lt $((GRACE * 1000)) ] && [ "$inflight" = 200 ]; then
  pass "SIGTERM: stopped in $stop_ms ms (grace ${GRACE} s, stop -t $STOP_TIMEOUT), exit code 0, the request in flight answered $inflight"
else fail "SIGTERM: stopped in $stop_ms ms, exit code $exit_code, the request in flight answered ${inflight:-nothing}"; fi

echo
if [ "$failures" = 0 ]; then echo "check-image: all checks passed"; else echo "check-image: $failures check(s) failed"; exit 1; fi
