#!/usr/bin/env bash
# build.sh VARIANT [CONFIGURE ARGS...] — bootstraps once and builds into
# build/VARIANT out of tree: everything, or only the make targets named in
# BUILD_TARGETS (scripts/run.sh builds what it runs). Prints the build
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
variant=$1
shift
[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
    autoreconf -fi >&2
mkdir -p "build/$variant"
cd "build/$variant"
[ -f Makefile ] && [ config.status -nt ../../configure ] || ../../configure "$@" >&2
read -ra targets <<< "${BUILD_TARGETS:-}"
make -j"$(nproc)" "${targets[@]}" >&2
pwd
