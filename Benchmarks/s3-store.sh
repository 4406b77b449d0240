#!/usr/bin/env bash
# Issue 36: what an S3-compatible replica store costs, against a folder,
# in one run on this machine. The sample server (release build;
# BUILD_CONFIG=debug for the debug one) with Litestream 0.5.17 and a
# moto_server of the venv on loopback (scripts/bootstrap installs both),
# configured by the replication section's "s3" keys (region, endpoint, a
# 0600 credentials file); scripts/s3-fault-proxy.py, passing everything,
# sits between the servers and moto and counts requests by kind (PUT, GET,
# LIST, HEAD, DELETE, POST: what object storage bills apart).
#
#   1. requests per acknowledged write: `writes` durable writes one after
#      the other on one tenant (each answered once its upload is in the
#      bucket), then the same number of asynchronous writes, one after the
#      other, with the requests of the 3 s after them (Litestream's next
#      sync) counted in;
#   2. requests per second of idle tenants: `tenants` tenants written once,
#      then left alone for two windows of `idle_seconds` (the first holds
#      whatever Litestream does after the writes, the second is the steady
#      state), on a server that never parks idle tenants and on one that
#      parks them after PARK_SECONDS (60), each behind its own counting
#      proxy (an idle window of 330 s or more spans Litestream's level-0
#      retention check, every 5 minutes);
#   3. restore time of a tenant of about `megabytes` MB with
#      `registryctl restore --from-replica --tenant`: from the bucket
#      (moto directly, not through the counting proxy) against from a
#      file:// folder, in alternating rounds, each restore checked by its
#      row count.
#
# Usage: [PARK_SECONDS=60] Benchmarks/s3-store.sh [tenants=20] [writes=200] [idle_seconds=30] [megabytes=10] [rounds=3]
# Prints a Markdown block for Benchmarks/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-20}
writes=${2:-200}
idle_seconds=${3:-30}
megabytes=${4:-10}
rounds=${5:-3}
root=$PWD
venv="$root/.build-venv"
litestream="$venv/bin/litestream"
[ "$("$litestream" version 2>/dev/null)" = "0.5.17" ] || { echo "Litestream 0.5.17 is missing: run scripts/bootstrap" >&2; exit 1; }
[ -x "$venv/bin/moto_server" ] || { echo "moto_server is missing: run scripts/bootstrap" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite3 is missing: run scripts/bootstrap" >&2; exit 1; }

build_config=${BUILD_CONFIG:-release}
swift build -c "$build_config" --package-path Samples/MultiTenantServer --product MultiTenantServer >&2
sample_bin="$(swift build -c "$build_config" --package-path Samples/MultiTenantServer --show-bin-path)"
swift build -c "$build_config" --product registryctl >&2
registryctl="$(swift build -c "$build_config" --show-bin-path)/registryctl"

source Benchmarks/lib/servers.sh
work=$(mktemp -d /tmp/s3-store-bench.XXXXXX)
pids=()
servers=()
cleanup() {
    local status=$?
    set +e
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    [ -n "${KEEP_LOGS:-}" ] && cp "$work/moto.log" "$KEEP_LOGS" 2>/dev/null
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
export MTS_OPERATOR_TOKEN="benchmark-operator-token-$(od -An -tx1 -N16 /dev/urandom | tr -d " \n")"
# Nothing looks for the instance metadata service: every client here has
# explicit keys and a loopback endpoint.
export AWS_EC2_METADATA_DISABLED=true
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_REGION AWS_ENDPOINT_URL AWS_PROFILE

free_port() { "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# moto, without request authentication (the tests check signatures; here
# only the counts and times matter), and its bucket.
moto_port=$(free_port)
"$venv/bin/moto_server" -H 127.0.0.1 -p "$moto_port" >"$work/moto.log" 2>&1 &
pids+=($!)
"$venv/bin/python" - "$moto_port" <<'PY'
import boto3, socket, sys, time
port = int(sys.argv[1])
deadline = time.time() + 30
while True:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(0.1)
boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
             aws_access_key_id="bench", aws_secret_access_key="bench-secret").create_bucket(Bucket="bench")
PY
# Starts a counting proxy in front of moto, logging to $work/$2; sets the
# variable named $1 to its URL.
start_proxy() {
    local port=
    "$venv/bin/python" scripts/s3-fault-proxy.py --upstream "http://127.0.0.1:$moto_port" >"$work/$2" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do
        port=$(grep -o 'listening on [0-9]*' "$work/$2" | grep -o '[0-9]*$' || true)
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "a proxy did not start:" >&2; cat "$work/$2" >&2; exit 1; }
    printf -v "$1" 'http://127.0.0.1:%s' "$port"
}
start_proxy proxy proxy.log
# The parking server's own proxy: its requests counted apart.
start_proxy parked_proxy proxy-parked.log
park_seconds=${PARK_SECONDS:-60}

printf '[default]\naws_access_key_id = bench\naws_secret_access_key = bench-secret\n' >"$work/s3.credentials"
chmod 600 "$work/s3.credentials"

# A data directory with its registry.json. $2: "s3 NAME ENDPOINT" or
# "folder DIR"; $3: async or durable; $4: parkIdleTenantsAfterSeconds (0,
# never, unless given).
configure() {
    local data=$1 kind=$2 acks=$3 park=${4:-0} replica
    mkdir -p "$data"
    case "$kind" in
        s3\ *)
            set -- $kind
            replica="\"replica\": \"s3://bench/$2\", \"s3\": {\"region\": \"us-east-1\", \"endpoint\": \"$3\", \"credentialsFile\": \"$work/s3.credentials\"}" ;;
        folder\ *)
            set -- $kind
            replica="\"replica\": \"$2\"" ;;
    esac
    cat >"$data/registry.json" <<JSON
{"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
 "tenants": {"root": "tenants", "migrations": "migrations/players", "maxOpen": 2048},
 "shutdownTimeoutSeconds": 5,
 "replication": {$replica, "litestream": "$litestream", "socket": "$data/ls.sock", "acknowledgements": "$acks",
                 "parkIdleTenantsAfterSeconds": $park}}
JSON
}

# Starts the sample on data directory $2 (Benchmarks/lib/servers.sh's
# start); sets the variable named $1 to its base URL and ${1}_pid to its pid.
serve() {
    start "$1" "$sample_bin/MultiTenantServer" --port 0 --data "$2"
    printf -v "${1}_pid" '%s' "${pids[-1]}"
}

# Stops the server whose pid is $1 (SIGTERM: Litestream's last sync, then
# exit), waiting for it.
stop() {
    kill "$1"
    for _ in $(seq 1 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    echo "server $1 did not stop within 30 s" >&2; exit 1
}

# Creates tenant $2 on $1; prints its token.
create() {
    curl -sf -X POST "$1/tenants" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" \
        -H 'Content-Type: application/json' -d "{\"id\":\"$2\"}" | sed -E 's/.*"token":"([^"]+)".*/\1/'
}

# $4 writes to tenant $2 (token $3) on $1, one after the other on one
# connection; every answer must be 201.
batch=0
write_many() {
    local base=$1 id=$2 token=$3 count=$4 args=()
    # Names are unique per team (the sample's invariant): one batch each.
    batch=$((batch + 1))
    for i in $(seq 1 "$count"); do
        [ "$i" -gt 1 ] && args+=(--next)
        args+=(-s -o /dev/null -w '%{http_code}\n' -X POST "$base/tenants/$id/players" -H "Authorization: Bearer $token"
            -H 'Content-Type: application/json' -d "{\"name\":\"w$batch-$i\",\"score\":$i}")
    done
    local codes
    codes=$(curl "${args[@]}" | sort | uniq -c | tr -s ' ')
    [ "$codes" = " $count 201" ] || { echo "writes to $id on $base: $codes" >&2; exit 1; }
}

counts() { curl -sf "${1:-$proxy}/__fault__"; }

# "total kind=n kind=n…" of the requests between snapshots $1 and $2,
# divided by $3.
per() {
    "$venv/bin/python" - "$1" "$2" "$3" <<'PY'
import json, sys
before, after, unit = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
kinds = {k: after["kinds"].get(k, 0) - before["kinds"].get(k, 0) for k in after["kinds"]}
kinds = {k: v for k, v in sorted(kinds.items()) if v}
total = after["requests"] - before["requests"]
print(f"{total / unit:.3g}" + ("" if not kinds else " (" + ", ".join(f"{k} {v / unit:.3g}" for k, v in kinds.items()) + ")"))
PY
}

configure "$work/durable" "s3 durable $proxy" durable
configure "$work/async" "s3 async $proxy" async
configure "$work/folder" "folder $work/folder-replica" async
configure "$work/parked" "s3 parked $parked_proxy" async "$park_seconds"
serve durable "$work/durable"
serve parked "$work/parked"
serve async "$work/async"
serve folder "$work/folder"

echo "1. requests per acknowledged write ($writes durable, then $writes asynchronous)…" >&2
token=$(create "$durable" w)
write_many "$durable" w "$token" 5
sleep 3
before=$(counts); started=$(date +%s.%N)
write_many "$durable" w "$token" "$writes"
elapsed=$(awk -v a="$(date +%s.%N)" -v b="$started" 'BEGIN { print a - b }')
after=$(counts)
durable_per_write=$(per "$before" "$after" "$writes")
durable_rate=$(awk -v n="$writes" -v t="$elapsed" 'BEGIN { printf "%.1f", n / t }')

token=$(create "$async" w)
write_many "$async" w "$token" 5
sleep 3
before=$(counts); started=$(date +%s.%N)
write_many "$async" w "$token" "$writes"
elapsed=$(awk -v a="$(date +%s.%N)" -v b="$started" 'BEGIN { print a - b }')
sleep 3
after=$(counts)
async_per_write=$(per "$before" "$after" "$writes")
async_rate=$(awk -v n="$writes" -v t="$elapsed" 'BEGIN { printf "%.1f", n / t }')

echo "2. $tenants idle tenants, two windows of $idle_seconds s…" >&2
for t in $(seq 1 "$tenants"); do
    token=$(create "$async" "idle$t")
    write_many "$async" "idle$t" "$token" 1
    token=$(create "$parked" "idle$t")
    write_many "$parked" "idle$t" "$token" 1
done
# The durable server's tenant is idle too from now on.
first=$(counts); parked_first=$(counts "$parked_proxy")
sleep "$idle_seconds"
second=$(counts); parked_second=$(counts "$parked_proxy")
sleep "$idle_seconds"
third=$(counts); parked_third=$(counts "$parked_proxy")
idle_units=$(( (tenants + 2) * idle_seconds ))
idle_first=$(per "$first" "$second" "$idle_units")
idle_second=$(per "$second" "$third" "$idle_units")
parked_units=$(( tenants * idle_seconds ))
parked_idle_first=$(per "$parked_first" "$parked_second" "$parked_units")
parked_idle_second=$(per "$parked_second" "$parked_third" "$parked_units")
stop "$parked_pid"

echo "3. restore of a ~$megabytes MB tenant, S3 against a folder…" >&2
create "$async" big >/dev/null
create "$folder" big >/dev/null
stop "$async_pid"
stop "$folder_pid"
# About 250 bytes a player, its two indexes included.
rows=$(( megabytes * 1024 * 1024 / 250 ))
for data in "$work/async" "$work/folder"; do
    file=$(find "$data" -name big.sqlite | head -n 1)
    [ -n "$file" ] || { echo "no big.sqlite under $data" >&2; exit 1; }
    sqlite3 "$file" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
        INSERT INTO player (name, score) SELECT printf('%0100d', i), i % 1000 FROM n; PRAGMA wal_checkpoint(TRUNCATE);"
done
size_kb=$(du -k "$(find "$work/async" -name big.sqlite | head -n 1)" | cut -f1)
expected=$(sqlite3 "$(find "$work/async" -name big.sqlite | head -n 1)" "SELECT COUNT(*) FROM player")
# Started again, the servers' scans register the file with Litestream,
# whose first sync uploads all of it; stopped, their last sync ends.
serve async "$work/async"
serve folder "$work/folder"
sleep 8
stop "$async_pid"
stop "$folder_pid"
# registryctl reaches moto directly: the proxy answers every request on a
# connection of its own, which a restore should not pay for.
sed "s|$proxy|http://127.0.0.1:$moto_port|" "$work/async/registry.json" >"$work/async/restore.json"
s3_times=() folder_times=()
# Restores tenant big with the configuration $1 into data directory $2;
# sets `seconds` to how long registryctl took.
restore() {
    local config=$1 data=$2 file
    file=$(find "$data" -name big.sqlite | head -n 1)
    [ -n "$file" ] || { echo "no big.sqlite under $data" >&2; exit 1; }
    rm -f "$file" "$file-wal" "$file-shm"
    local started ended
    started=$(date +%s.%N)
    "$registryctl" restore --config "$config" --from-replica --tenant big >"$work/restore.log" 2>&1 \
        || { echo "registryctl restore failed:" >&2; cat "$work/restore.log" >&2; exit 1; }
    ended=$(date +%s.%N)
    local count
    count=$(sqlite3 "$file" "SELECT COUNT(*) FROM player")
    [ "$count" = "$expected" ] || { echo "restored $count rows from $config, expected $expected" >&2; exit 1; }
    seconds=$(awk -v a="$ended" -v b="$started" 'BEGIN { printf "%.2f", a - b }')
}
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then
        restore "$work/async/restore.json" "$work/async"; s3_times+=("$seconds")
        restore "$work/folder/registry.json" "$work/folder"; folder_times+=("$seconds")
    else
        restore "$work/folder/registry.json" "$work/folder"; folder_times+=("$seconds")
        restore "$work/async/restore.json" "$work/async"; s3_times+=("$seconds")
    fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
s3_median=$(median "${s3_times[@]}")
folder_median=$(median "${folder_times[@]}")

cat <<EOF
$(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $build_config build, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) after the run; Litestream $("$litestream" version), moto_server on loopback, \`Benchmarks/s3-store.sh $tenants $writes $idle_seconds $megabytes $rounds\`.

| | figure |
|---|---|
| requests per durable write (one at a time, $durable_rate writes/s) | $durable_per_write |
| requests per asynchronous write (one at a time, $async_rate writes/s, with the 3 s after) | $async_per_write |
| requests per idle tenant-second, first $idle_seconds s after the writes ($((tenants + 2)) tenants) | $idle_first |
| requests per idle tenant-second, the next $idle_seconds s | $idle_second |
| the same, tenants parked after $park_seconds s ($tenants tenants): first $idle_seconds s | $parked_idle_first |
| the same, parked: the next $idle_seconds s | $parked_idle_second |
| restore of a $((size_kb / 1024)) MB tenant ($expected players), \`registryctl restore --from-replica\`, median of $rounds | S3 $s3_median s, folder $folder_median s (S3: ${s3_times[*]}; folder: ${folder_times[*]}) |
EOF
