#!/bin/sh
# Makes a local stand-in for the Dockerfile's base image (node:22-slim) where no container
# registry can be reached: a Debian bookworm minbase root (debootstrap, from Debian's mirror
# through apt) with this host's Node and npm copied in, and the user node (1000:1000) that
# node:*-slim images have, imported into podman's store as $BASE_IMAGE. Then:
#   podman build --build-arg NODE_IMAGE=localhost/tollgate-node-base:bookworm .
# Run as root (debootstrap chroots). Cached: the debootstrap root is kept as a tarball in
# $CACHE_DIR, and an image already built from the same Node and tarball is kept as it is, so a
# second run takes about a second. Needs debootstrap (apt-get install debootstrap) and podman.
#
#   deploy/make-base-image.sh            # prints the image's name on its last line
#   FORCE=1 deploy/make-base-image.sh    # debootstrap again
#
# Node must be >= 20.19 (package.json engines). Debian bookworm's own nodejs is 18, too old,
# hence the host's. The node binary must be dynamically linked against glibc only (ldd shows
# libstdc++, libc, ...), which bookworm provides.
set -eu

BASE_IMAGE=${BASE_IMAGE:-localhost/tollgate-node-base:bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
CACHE_DIR=${CACHE_DIR:-/var/cache/tollgate-image}
NODE_BIN=${NODE_BIN:-$(command -v node)}
NPM_DIR=${NPM_DIR:-$(dirname "$(dirname "$NODE_BIN")")/lib/node_modules/npm}
# The host's own CA certificates (a TLS-inspecting proxy's, a company's): the base trusts them
# too, so that `npm ci` in the build reaches the registry the way the host does. EXTRA_CA_DIR=
# (empty) for none.
EXTRA_CA_DIR=${EXTRA_CA_DIR-/usr/local/share/ca-certificates}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/podman-env.sh"

die() { echo "make-base-image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: debootstrap needs to chroot"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
[ -x "$NODE_BIN" ] || die "no node at NODE_BIN=$NODE_BIN"
[ -f "$NPM_DIR/bin/npm-cli.js" ] || die "no npm at NPM_DIR=$NPM_DIR (set it to the directory holding bin/npm-cli.js)"
node_version=$("$NODE_BIN" --version)
"$NODE_BIN" -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' ||
  die "node $node_version is older than 20.19 (package.json engines)"

mkdir -p "$CACHE_DIR"
rootfs_tar="$CACHE_DIR/bookworm-minbase.tar"
if [ -n "${FORCE:-}" ] || [ ! -s "$rootfs_tar" ]; then
  work=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "make-base-image: debootstrap bookworm from $MIRROR (a few minutes)" >&2
  # libstdc++6 for node; ca-certificates so npm and fetch can verify TLS.
  debootstrap --variant=minbase --include=libstdc++6,ca-certificates bookworm "$work/root" "$MIRROR" >&2
  # What a slim image leaves out: apt's package lists and caches, docs, man pages, locales.
  rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/"*.bin "$work/root/var/cache/apt/archives/"*.deb \
    "$work/root/usr/share/doc/"* "$work/root/usr/share/man/"* "$work/root/usr/share/info/"* "$work/root/var/log/"*.log
  tar -C "$work/root" -cf "$rootfs_tar.tmp" .
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$work"
  trap - EXIT
fi

# The image is kept when it was made from this Node and this tarball.
extra_cas=
[ -n "$EXTRA_CA_DIR" ] && extra_cas=$(find "$EXTRA_CA_DIR" -maxdepth 1 -name '*.crt' 2>/dev/null | sort)
cas_sum=$( ([ -n "$extra_cas" ] && cat $extra_cas) | sha256sum | cut -c1-12)
stamp="node=$node_version rootfs=$(stat -c %Y "$rootfs_tar") cas=$cas_sum"
if [ -z "${FORCE:-}" ] && [ "$(podman image inspect --format '{{index .Labels "tollgate.base-stamp"}}' "$BASE_IMAGE" 2>/dev/null)" = "$stamp" ]; then
  echo "make-base-image: $BASE_IMAGE is up to date ($stamp)" >&2
  echo "$BASE_IMAGE"
  exit 0
fi

echo "make-base-image: building $BASE_IMAGE with node $node_version" >&2
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$rootfs_tar" "$ctx/rootfs.tar"
mkdir -p "$ctx/node/bin" "$ctx/node/lib/node_modules"
cp "$NODE_BIN" "$ctx/node/bin/node"
cp -a "$NPM_DIR" "$ctx/node/lib/node_modules/npm"
mkdir -p "$ctx/ca"
ca_steps=
if [ -n "$extra_cas" ]; then
  # shellcheck disable=SC2086
  cp $extra_cas "$ctx/ca/"
  # Node reads its own CA list, not the system's: NODE_EXTRA_CA_CERTS adds the system's to it.
  ca_steps='RUN update-ca-certificates
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt'
fi
# The layout of the official node images: /usr/local/bin/{node,npm,npx}, user node 1000:1000.
cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM scratch
ADD rootfs.tar /
COPY node /usr/local
COPY ca /usr/local/share/ca-certificates/
$ca_steps
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/sh --create-home node \\
 && node --version && npm --version
LABEL tollgate.base-stamp="$stamp"
CMD ["node"]
CONTAINERFILE
podman build --network host --runtime runc -t "$BASE_IMAGE" "$ctx" >&2
echo "$BASE_IMAGE"
