#!/bin/sh
# Creates (or replaces) the Secret tollgate-secrets with values made here, at deploy time, so
# nothing guessable is ever committed: a random admin token, a random API key for the example
# client acme-prod (printed once; the Secret keeps only its SHA-256) and the Redis URL you give.
#
#   REDIS_URL='redis://:PASSWORD@redis.default.svc.cluster.local:6379' \
#     deploy/kubernetes/create-secrets.sh [-n NAMESPACE]
#
# Arguments go to kubectl (a namespace, a --context). Running it again rotates the token and the
# key; pods read the Secret at start: `kubectl rollout restart deployment/tollgate` applies it.
# Read the admin token back with:
#   kubectl get secret tollgate-secrets -o jsonpath='{.data.admin-token}' | base64 -d
set -eu
: "${REDIS_URL:?set REDIS_URL to the Redis the instances share, e.g. redis://:PASSWORD@redis.default.svc.cluster.local:6379}"

random_hex() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
sha256_hex() {
  if command -v sha256sum >/dev/null 2>&1; then printf %s "$1" | sha256sum; else printf %s "$1" | shasum -a 256; fi |
    cut -d' ' -f1
}

# One file per key, readable by this user only, deleted on exit: values on kubectl's command line
# would be visible to every local user in the process list.
umask 077
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
acme_key=$(random_hex)
printf %s "$REDIS_URL" >"$dir/redis-url"
random_hex >"$dir/admin-token"
printf %s "$(sha256_hex "$acme_key")" >"$dir/acme-prod-key-sha256"

kubectl create secret generic tollgate-secrets --from-file="$dir" --dry-run=client -o yaml "$@" |
  kubectl apply "$@" -f -

echo "API key of the client acme-prod (shown once, stored nowhere; give it to the client): $acme_key"
