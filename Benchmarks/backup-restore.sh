#!/usr/bin/env bash
# Wall time for `registryctl backup` and `registryctl restore --all` of N
# encrypted tenants (issue 17, part A), --jobs 1 and 2, next to `cp -a` of
# the same tenants directory in the same run (the file-copy floor: no
# snapshot, no check, no fsync).
#
# Usage: Benchmarks/backup-restore.sh [tenants=1000] [runs=1] [build=release] [scratch=.build-bench]
# Tenants are empty files that `registryctl migrate --master-key-env` turns
# into encrypted tenants (a new file gets a tenant key from the master key),
# with the shipped players set plus a migration that inserts 100 players.
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-1000}
runs=${2:-1}
build=${3:-release}
scratch=${4:-.build-bench}

swift build -c "$build" --product registryctl --scratch-path "$scratch" >&2
registryctl="$(swift build -c "$build" --scratch-path "$scratch" --show-bin-path)/registryctl"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export BENCH_MASTER_KEY=$(printf '5a%.0s' $(seq 1 32))
mkdir "$work/players"
cp Migrations/players/0*.sql "$work/players/"
cat > "$work/players/0100_bench_players.sql" <<'SQL'
INSERT INTO player(name, score)
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100)
SELECT printf('player %d', x), x FROM n;
SQL
config() {   # config FILE ROOT
    cat > "$1" <<JSON
{ "databases": {},
  "tenants": { "root": "$2", "migrations": "$work/players", "masterKey": { "env": "BENCH_MASTER_KEY" } } }
JSON
}
mkdir -p "$work/source/tenants"
config "$work/source.json" "$work/source/tenants"
for i in $(seq -w 1 "$tenants"); do : > "$work/source/tenants/t$i.sqlite"; done
"$registryctl" migrate --config "$work/source.json" --jobs 2 --no-progress > "$work/migrate.txt"
tail -1 "$work/migrate.txt" >&2
size=$(du -sk "$work/source/tenants" | cut -f1)

echo "registryctl: $registryctl ($build)"
echo "tenants=$tenants encrypted=yes size=${size}KB cores=$(nproc) tmp=$(df -P "$work" | awk 'NR==2 {print $1}') load=\"$(uptime | sed 's/.*load average: //')\""
TIMEFORMAT='%R'
measure() {   # measure LABEL COMMAND...: prints the wall time in seconds
    local seconds
    shift
    seconds=$( { time "$@" > "$work/out.txt" 2> "$work/err.txt"; } 2>&1 ) || { cat "$work/out.txt" "$work/err.txt" >&2; exit 1; }
    echo "$seconds"
}
for run in $(seq 1 "$runs"); do
    sync
    floor=$(measure cp cp -a "$work/source/tenants" "$work/cp-$run")
    line="run $run: cp -a ${floor}s"
    for jobs in 1 2; do
        backup="$work/backup-$jobs-$run"
        b=$(measure backup "$registryctl" backup --config "$work/source.json" --to "$backup" --jobs "$jobs" --no-progress)
        grep -q "$tenants of $tenants databases backed up" "$work/out.txt" || { cat "$work/out.txt" >&2; exit 1; }
        config "$work/target-$jobs-$run.json" "$work/target-$jobs-$run/tenants"
        r=$(measure restore "$registryctl" restore --config "$work/target-$jobs-$run.json" --from "$backup" --all --jobs "$jobs" --no-progress)
        grep -q "$tenants of $tenants databases restored; 0 failed" "$work/out.txt" || { cat "$work/out.txt" >&2; exit 1; }
        line+=" | jobs $jobs: backup ${b}s ($(awk -v a="$b" -v f="$floor" 'BEGIN {printf "%.1f", a / f}')x cp), restore ${r}s ($(awk -v a="$r" -v f="$floor" 'BEGIN {printf "%.1f", a / f}')x cp)"
        rm -rf "$backup" "$work/target-$jobs-$run"
    done
    rm -rf "$work/cp-$run"
    echo "$line"
done
