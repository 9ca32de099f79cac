#!/usr/bin/env bash
# deps.sh [run|test] — installs the Debian 12 packages of one set, only
# those missing: "run" (scripts/run.sh: what builds and runs calibd, calibctl
# and the simulator), or "test" (the default; scripts/test.sh: the run set
# and what the tests use besides: cmocka, clang and its sanitizer runtimes,
# a real Prometheus and a real Chromium, ...).
set -euo pipefail
set_name=${1:-test}
run=(build-essential autoconf automake libtool pkg-config
     libuv1-dev libzmq3-dev libmsgpack-dev libinih-dev libmicrohttpd-dev zlib1g-dev libcsv-dev
     libjansson-dev librdkafka-dev
     python3) # scripts/live_status.py
tests=(libcmocka-dev # the unit tests
       curl python3-zmq python3-msgpack # the integration tests' probes and senders
       python3-confluent-kafka # the Kafka tests' producer (tests/integ/kafka.sh)
       python3-numpy python3-pytest python3-venv python3-setuptools python3-wheel # python/
       clang libclang-rt-14-dev # the sanitizers build and libFuzzer (tests/fuzz)
       openssl # test certificates for HTTPS (tests/integ/https.sh)
       libfaketime # a wall clock stepped under a running calibd (tests/integ/clock.sh)
       valgrind # callgrind: the cost budgets in instructions (tests/integ/budget.sh)
       prometheus # promtool and a real Prometheus, for the metrics and pooling tests
       chromium) # a real headless browser, for the page's test (tests/integ/page.sh)
case $set_name in
    run) pkgs=("${run[@]}") ;;
    test) pkgs=("${run[@]}" "${tests[@]}") ;;
    *) echo "deps.sh: no set '$set_name' (run or test)" >&2; exit 2 ;;
esac
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
