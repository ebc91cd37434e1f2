# Sourced by make-base-image.sh and check-image.sh: podman settings this kind of host needs,
# set here rather than assumed. Where the VM refuses crun and the default ulimits (podman
# answers "crun: ... setrlimit ... Operation not permitted"), CONTAINERS_CONF points at a file
# holding `default_ulimits = []`, and PODMAN_RUNTIME picks runc. Both can be overridden.
if [ -z "${CONTAINERS_CONF:-}" ]; then
  CONTAINERS_CONF=${TMPDIR:-/tmp}/tollgate-containers.conf
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "%s"\n' "${PODMAN_RUNTIME:-runc}" >"$CONTAINERS_CONF"
  export CONTAINERS_CONF
fi
