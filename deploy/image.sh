#!/bin/sh
# Build deploy/Dockerfile with buildah (no Docker daemon): `make image` runs this script.
#
#   deploy/image.sh              build the image $IMAGE (default localhost/ncindex:latest)
#   deploy/image.sh base         only make the local Debian base $BASE_IMAGE
#
# PYTHON_IMAGE is the Dockerfile's build argument, the base of both stages. Set it to the
# official image (docker.io/library/python:3.11-slim-bookworm) where a registry is reachable.
# Left empty, a local base is used instead: Debian bookworm made by debootstrap from
# deb.debian.org (python3 3.11, python3-venv, pip, `python` on PATH: what the Dockerfile
# expects of the official image), imported as $BASE_IMAGE. Its root filesystem is kept under
# var/image/rootfs, so a second build neither downloads nor unpacks Debian again.
#
# Storage and isolation: vfs and chroot, which work as root without a daemon, overlay
# support or user namespaces (STORAGE_DRIVER and BUILDAH_ISOLATION override them; the driver
# is passed as buildah's --storage-driver, which this buildah, 1.28, does not read from the
# environment).
set -eu

cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-localhost/ncindex:latest}
BASE_IMAGE=${BASE_IMAGE:-localhost/ncindex-base:bookworm}
PYTHON_IMAGE=${PYTHON_IMAGE:-}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ROOTFS=var/image/rootfs
STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"

need() {
	command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2"; }
}

bah() {
	buildah --storage-driver "$STORAGE_DRIVER" "$@"
}

make_rootfs() {
	[ -x "$ROOTFS/usr/bin/python" ] && return 0
	need debootstrap debootstrap
	rm -rf "$ROOTFS.partial"
	mkdir -p var/image
	debootstrap --variant=minbase \
		--include=passwd,python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
		bookworm "$ROOTFS.partial" "$DEBIAN_MIRROR"
	# The release's updates and security suites, as in the official image's Debian.
	cat >"$ROOTFS.partial/etc/apt/sources.list" <<-EOF
		deb $DEBIAN_MIRROR bookworm main
		deb $DEBIAN_MIRROR bookworm-updates main
		deb http://deb.debian.org/debian-security bookworm-security main
	EOF
	rm -rf "$ROOTFS.partial"/var/cache/apt/archives/*.deb "$ROOTFS.partial"/var/lib/apt/lists/*
	mv "$ROOTFS.partial" "$ROOTFS"
}

make_base() {
	bah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 && return 0
	make_rootfs
	ctr=$(bah from scratch)
	mnt=$(bah mount "$ctr")
	tar -C "$ROOTFS" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
		tar -C "$mnt" -x
	# This host's extra certificate authorities (an HTTPS proxy in front of PyPI, say) and
	# PIP_CERT: Debian's pip 23 reads its own certifi bundle, not the system's, unless told.
	if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
		cp /usr/local/share/ca-certificates/*.crt "$mnt/usr/local/share/ca-certificates/"
		chroot "$mnt" update-ca-certificates >/dev/null
	fi
	bah umount "$ctr" >/dev/null
	bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env LANG=C.UTF-8 --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
		--cmd python3 "$ctr"
	bah commit --rm "$ctr" "$BASE_IMAGE" >/dev/null
	echo "base image $BASE_IMAGE"
}

need buildah buildah
if [ -z "$PYTHON_IMAGE" ]; then
	make_base
	PYTHON_IMAGE=$BASE_IMAGE
fi
[ "${1:-}" = base ] && exit 0

start=$(date +%s)
bah bud --layers --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" \
	-f deploy/Dockerfile --ignorefile deploy/Dockerfile.dockerignore -t "$IMAGE" .
echo "built $IMAGE from $PYTHON_IMAGE in $(($(date +%s) - start)) s"
bah images "$IMAGE"
