#!/bin/sh
# The image's entrypoint: runs tollgate (as PID 1, by exec, so SIGTERM reaches it) on the config
# at $TOLLGATE_CONFIG. The image holds no config of its own: a default would either accept the
# demo's guessable keys or none at all, so without a mounted config it refuses to start and
# says what to do. A config whose clients use a key published in the repository (the demo's,
# the examples') is refused too (deploy/demo-keys.mjs), unless TOLLGATE_ALLOW_DEMO_KEYS=1.
# Arguments pass through: --check, --config PATH, --help, --version, the operator commands.
set -eu
here=$(dirname "$0")

explicit=   # the arguments name a config, or need none
serve=1     # the gateway is to run (not --check, --help, --version or an operator command)
config=${TOLLGATE_CONFIG:-}
want_path=
for arg in "$@"; do
  if [ -n "$want_path" ]; then config=$arg; want_path=; continue; fi
  case "$arg" in
    --config | -c) explicit=1; want_path=1 ;;
    --config=*) explicit=1; config=${arg#--config=} ;;
    --help | -h | --version) explicit=1; serve= ;;
    -*) [ "$arg" = --check ] && serve= ;;
    *) serve= ;;
  esac
done

if [ -z "$explicit" ] && [ ! -e "${TOLLGATE_CONFIG:-}" ]; then
  cat >&2 <<EOF
tollgate: no config at ${TOLLGATE_CONFIG:-(TOLLGATE_CONFIG is empty)}.
The image has no config of its own (the demo's plain keys are guessable). Mount your config's
directory there, for example:
  docker run -v "\$PWD/tollgate:/etc/tollgate:ro" -p 8080:8080 tollgate
with ./tollgate/gateway.yaml listening on 0.0.0.0 (config/gateway.yaml in the repository reads
TOLLGATE_LISTEN, which the image sets to 0.0.0.0:8080), or set TOLLGATE_CONFIG to its path.
Check it first: docker run --rm -v "\$PWD/tollgate:/etc/tollgate:ro" tollgate --check
EOF
  exit 2
fi

if [ -n "$serve" ] && [ "${TOLLGATE_ALLOW_DEMO_KEYS:-}" != 1 ]; then
  node "$here/deploy/demo-keys.mjs" "$config" || exit $?
fi

exec node "$here/dist/cli.js" "$@"
