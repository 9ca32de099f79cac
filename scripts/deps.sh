#!/usr/bin/env bash
# deps.sh — installs the Debian 12 packages calibd builds and tests with,
# only those missing. Used by run.sh and test.sh.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config curl
      clang libclang-rt-14-dev # the sanitizers build and libFuzzer (tests/fuzz)
      openssl # test certificates for HTTPS (tests/integ/https.sh)
      libuv1-dev libzmq3-dev libmsgpack-dev libinih-dev libmicrohttpd-dev zlib1g-dev libcsv-dev libcmocka-dev python3
      python3-zmq python3-msgpack
      prometheus # promtool and a real Prometheus, for the metrics and pooling tests
      chromium) # a real headless browser, for the page's test (tests/integ/page.sh)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
