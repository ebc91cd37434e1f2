#!/bin/sh
# The image's entrypoint: runs tollgate (as PID 1, by exec, so SIGTERM reaches it) on the config
# at $TOLLGATE_CONFIG. The image holds no config of its own: a default would either accept the
# demo's guessable keys or none at all, so without a mounted config it refuses to start and
# says what to do. Arguments pass through: --check, --config PATH, --help, --version.
set -eu
here=$(dirname "$0")

explicit=
for arg in "$@"; do
  case "$arg" in
    --config | --config=* | -c | --help | -h | --version) explicit=1 ;;
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

exec node "$here/dist/cli.js" "$@"
