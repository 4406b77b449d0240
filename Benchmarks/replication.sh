#!/usr/bin/env bash
# Replication figures of the multi-tenant server (Samples/MultiTenantServer)
# with Litestream 0.5.17 (.build-venv/bin/litestream, from scripts/bootstrap),
# in one run, on this machine:
#   1. write throughput with replication off vs on: two servers up at once,
#      the same wrk write load on one then the other, in alternating pairs
#      (off-on, on-off, off-on, …: drift in the machine's load hits both
#      sides alike); the ratio of each pair and their median,
#   2. replication lag under that load: a probe tenant, outside the load,
#      gets one write every 250 ms during each "on" run; the lag is the time
#      from the write's acknowledgement to the first new LTX file of that
#      tenant in the file:// replica (p50, p99 over every probe),
#   3. restore time for N tenants (`litestream restore`, one after the
#      other, each checked by Litestream's integrity check),
#   4. replica size per 10,000 writes of one tenant.
# Release build (BUILD_CONFIG=debug for a quick run on the debug build).
# Prints a Markdown block for Benchmarks/RESULTS.md.
#
# Usage: Benchmarks/replication.sh [tenants=100] [seconds=10] [connections=32] [restore_tenants=1000] [writes=10000] [pairs=4]
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-100}
seconds=${2:-10}
connections=${3:-32}
restore_tenants=${4:-1000}
size_writes=${5:-10000}
pairs=${6:-4}
litestream="$PWD/.build-venv/bin/litestream"
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
[ "$("$litestream" version 2>/dev/null)" = "0.5.17" ] || { echo "Litestream 0.5.17 is missing: run scripts/bootstrap" >&2; exit 1; }

build_config=${BUILD_CONFIG:-release}
swift build -c "$build_config" --package-path Samples/MultiTenantServer --product MultiTenantServer >&2
sample_bin="$(swift build -c "$build_config" --package-path Samples/MultiTenantServer --show-bin-path)"

work=$(mktemp -d /tmp/replication-bench.XXXXXX)
pids=()
# Stops the servers and waits for each to exit before deleting their data:
# the "on" server stops Litestream after a last sync, and Litestream writes
# under the tenants' folder until then. Keeps the script's exit status.
cleanup() {
    local status=$?
    set +e
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
        # shutdownTimeoutSeconds is 5: a server still up after 30 s is stuck.
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "server $pid did not stop within 30 s of SIGTERM: killed" >&2
            kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null
    done
    rm -rf "$work" || { echo "could not delete $work: delete it by hand" >&2; status=1; }
    exit "$status"
}
trap cleanup EXIT
export MTS_OPERATOR_TOKEN="benchmark-operator-token-$(od -An -tx1 -N16 /dev/urandom | tr -d " \n")"

# A data directory with its registry.json; $2 = "on" adds replication.
configure() {
    local data=$1 replication=$2
    mkdir -p "$data"
    local section=""
    [ "$replication" = on ] && section=", \"replication\": {\"replica\": \"$work/replica\", \"litestream\": \"$litestream\", \"socket\": \"$work/ls.sock\"}"
    cat >"$data/registry.json" <<JSON
{"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
 "tenants": {"root": "tenants", "migrations": "migrations/players", "maxOpen": 2048},
 "shutdownTimeoutSeconds": 5$section}
JSON
}

# Starts a server; sets the variable named $1 to its base URL once it
# listens. Not in a command substitution: its subshell would keep the pid
# from `pids`, and the cleanup would neither stop the server nor wait for it.
start() {
    local name=$1 data=$2
    "$sample_bin/MultiTenantServer" --port 0 --data "$data" >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 600); do
        if port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/$name.log" | grep -o '[0-9]*$'); then
            printf -v "$name" 'http://127.0.0.1:%s' "$port"; return
        fi
        sleep 0.1
    done
    echo "$name did not start:" >&2; cat "$work/$name.log" >&2; exit 1
}

# Creates tenants $3..$4 (t<i>) on $1; appends "id token" lines to $2.
seed() {
    local base=$1 file=$2 first=$3 last=$4
    for t in $(seq "$first" "$last"); do
        local token
        token=$(curl -sf -X POST "$base/tenants" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" \
            -H 'Content-Type: application/json' -d "{\"id\":\"t$t\"}" | sed -E 's/.*"token":"([^"]+)".*/\1/')
        echo "t$t $token" >>"$file"
    done
}

configure "$work/off" off
configure "$work/on" on
start off "$work/off"
start on "$work/on"
echo "seeding $tenants tenants on each server…" >&2
: >"$work/off-tenants"; : >"$work/on-tenants"
seed "$off" "$work/off-tenants" 0 $((tenants - 1))
seed "$on" "$work/on-tenants" 0 $((tenants - 1))
probe_token=$(curl -sf -X POST "$on/tenants" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" \
    -H 'Content-Type: application/json' -d '{"id":"probe"}' | sed -E 's/.*"token":"([^"]+)".*/\1/')

export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
# Runs the write load for $3 seconds (default: $seconds); prints "requests/s p50 p99 non2xx".
load() {
    local base=$1 tenants_file=$2 duration=${3:-$seconds}
    local output
    output=$(WRK_TENANTS="$tenants_file" wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$WRK_SCRIPTS/writes.lua" "$base/tenants/t0/players")
    echo "$output" >>"$work/wrk.log"
    echo "$(echo "$output" | awk '/Requests\/sec/ {print $2}') $(echo "$output" | awk '$1 == "50%" {print $2}') $(echo "$output" | awk '$1 == "99%" {print $2}') $(echo "$output" | awk '/non-2xx or errors/ {print $NF}')"
}

# Replication lag of the probe tenant while $1 seconds pass: appends one lag
# in ms per probe to $work/lags.
probe() {
    python3 - "$on" "$probe_token" "$work/replica/tenants/probe/ltx/0" "$1" <<'PY'
import json, os, sys, time, urllib.request
base, token, folder, duration = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lags, end, n = [], time.monotonic() + duration, 0
while time.monotonic() < end:
    n += 1
    before = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    request = urllib.request.Request(f"{base}/tenants/probe/players", method="POST",
        data=json.dumps({"name": f"probe-{time.time_ns()}-{n}", "score": n}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()
    acknowledged = time.monotonic()
    while time.monotonic() - acknowledged < 30:
        if os.path.isdir(folder) and set(os.listdir(folder)) - before:
            lags.append((time.monotonic() - acknowledged) * 1000)
            break
        time.sleep(0.005)
    time.sleep(0.25)
for lag in lags:
    print(f"{lag:.1f}")
PY
}

# The "on" run, with the lag probe beside it.
run_on() {
    probe "$seconds" >>"$work/lags" &
    local probe_pid=$!
    load "$on" "$work/on-tenants"
    wait "$probe_pid"
}

echo "warming up both servers (every tenant opened, and registered with Litestream)…" >&2
load "$off" "$work/off-tenants" 3 >/dev/null
load "$on" "$work/on-tenants" 3 >/dev/null
: >"$work/lags"
pair_rows=""
ratios=()
for pair in $(seq 1 "$pairs"); do
    echo "pair $pair of $pairs…" >&2
    if [ $((pair % 2)) -eq 1 ]; then
        read -r offRps off50 off99 offErrors < <(load "$off" "$work/off-tenants")
        read -r onRps on50 on99 onErrors < <(run_on)
        order="off, on"
    else
        read -r onRps on50 on99 onErrors < <(run_on)
        read -r offRps off50 off99 offErrors < <(load "$off" "$work/off-tenants")
        order="on, off"
    fi
    r=$(awk -v a="$onRps" -v b="$offRps" 'BEGIN { printf "%.2f", a / b }')
    ratios+=("$r")
    pair_rows+="| pair $pair ($order) | $offRps req/s (p50 $off50, p99 $off99, non-2xx $offErrors) | $onRps req/s (p50 $on50, p99 $on99, non-2xx $onErrors) | $r× |"$'\n'
done
median_ratio=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
read -r lag50 lag99 lagCount < <(sort -n "$work/lags" | awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan nan 0"; exit } i50 = int(0.5 * NR) + 1; i99 = int(0.99 * NR) + 1; if (i50 > NR) i50 = NR; if (i99 > NR) i99 = NR; printf "%.0f %.0f %d\n", v[i50], v[i99], NR }')

echo "replica size per $size_writes writes…" >&2
big_token=$(curl -sf -X POST "$on/tenants" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" \
    -H 'Content-Type: application/json' -d '{"id":"big"}' | sed -E 's/.*"token":"([^"]+)".*/\1/')
python3 - "$on" "$big_token" "$size_writes" <<'PY'
import http.client, json, sys, urllib.parse
base, token, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
url = urllib.parse.urlparse(base)
connection = http.client.HTTPConnection(url.hostname, url.port)
for n in range(count):
    connection.request("POST", "/tenants/big/players", body=json.dumps({"name": f"player-{n}", "score": n}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    response = connection.getresponse(); response.read()
    assert response.status == 201, response.status
PY
sleep 4 # two sync intervals and a margin
size_kb=$(du -sk "$work/replica/tenants/big" | cut -f1)
db_kb=$(du -sk "$work/on/tenants/big.sqlite" | cut -f1)

echo "creating $restore_tenants tenants to restore…" >&2
: >"$work/restore-tenants"
seed "$on" "$work/restore-tenants" "$tenants" $((tenants + restore_tenants - 1))
# Never opened, so registered by the replicator's scan (its safety net),
# within a second each; wait until every one has a replica.
for _ in $(seq 1 600); do
    [ "$(ls "$work/replica/tenants" | grep -c '^t')" -ge $((tenants + restore_tenants)) ] && break
    sleep 0.5
done
sleep 3
mkdir -p "$work/restored"
restore_start=$(date +%s.%N)
for t in $(seq "$tenants" $((tenants + restore_tenants - 1))); do
    "$litestream" restore -integrity-check full -o "$work/restored/t$t.sqlite" "file://$work/replica/tenants/t$t" >/dev/null 2>&1 \
        || { echo "restore of t$t failed" >&2; exit 1; }
done
restore_end=$(date +%s.%N)
restore_total=$(awk -v a="$restore_start" -v b="$restore_end" 'BEGIN { printf "%.1f", b - a }')
restore_each=$(awk -v a="$restore_start" -v b="$restore_end" -v n="$restore_tenants" 'BEGIN { printf "%.0f", (b - a) * 1000 / n }')

cat <<TABLE
$(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $build_config build, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) after the run; wrk -t2 -c$connections -d${seconds}s writes over $tenants tenants per run, $pairs pairs of runs alternating off/on (ABBA); Litestream $("$litestream" version), file:// replica.

| pair | replication off | replication on | on / off |
|---|---|---|---|
${pair_rows}
| figure | result |
|---|---|
| on / off, median of $pairs pairs | **${median_ratio}×** (target ≥ 0.9×) |
| replication lag under that load (probe tenant, $lagCount probes) | p50 $lag50 ms, p99 $lag99 ms |
| restore of $restore_tenants tenants (\`litestream restore -integrity-check full\`, sequential) | $restore_total s, $restore_each ms per tenant |
| replica size per $size_writes writes of one tenant (before compaction) | $size_kb KiB (database $db_kb KiB) |
TABLE
