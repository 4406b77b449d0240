#!/usr/bin/env bash
# Wall time for registryctl to migrate N fresh tenant databases with 5
# migrations each (the shipped players set plus two), --jobs 1 vs --jobs 2.
#
# Usage: Benchmarks/migrate-tenants.sh [tenants=1000] [runs=3] [scratch=.build-bench]
# Prints one line per run and the median per job count. Tenants are created
# as empty files (valid empty SQLite databases) in a fresh folder per run, on
# the file system of $TMPDIR (default /tmp): its fsync cost dominates.
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-1000}
runs=${2:-3}
scratch=${3:-.build-bench}

swift build -c release --product registryctl --scratch-path "$scratch" >&2
registryctl="$(swift build -c release --scratch-path "$scratch" --show-bin-path)/registryctl"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
set_dir="$work/players5"
mkdir "$set_dir"
cp Migrations/players/0*.sql "$set_dir/"
cat > "$set_dir/0004_create_match.sql" <<'SQL'
CREATE TABLE match (
    id INTEGER PRIMARY KEY,
    playerId INTEGER NOT NULL REFERENCES player(id) ON DELETE CASCADE,
    score INTEGER NOT NULL,
    playedAt DATETIME NOT NULL
);
SQL
cat > "$set_dir/0005_index_match_player.sql" <<'SQL'
CREATE INDEX match_on_playerId ON match(playerId);
SQL

echo "registryctl: $registryctl" >&2
echo "tenants=$tenants migrations=5 runs=$runs cores=$(nproc) tmp=$(df -P "$work" | awk 'NR==2 {print $1}')"
# Runs alternate between job counts so that load from other processes on the
# machine (disk flushes, builds) spreads over both instead of biasing one.
declare -A times
for run in $(seq 1 "$runs"); do
    for jobs in 1 2; do
        root="$work/tenants-$jobs-$run"
        mkdir "$root"
        for i in $(seq -w 1 "$tenants"); do : > "$root/tenant-$i.sqlite"; done
        sync
        TIMEFORMAT='%R %U %S'
        { time "$registryctl" migrate --tenants-root "$root" --migrations "$set_dir" --jobs "$jobs" --no-progress \
            > "$work/out.txt" 2> "$work/err.txt"; } 2> "$work/time.txt"
        read -r wall user sys < <(tail -1 "$work/time.txt")
        grep -q "$tenants of $tenants databases succeeded ($((tenants * 5)) migrations applied)" "$work/out.txt" \
            || { echo "unexpected output:" >&2; tail -3 "$work/out.txt" >&2; exit 1; }
        times[$jobs]="${times[$jobs]:-} $wall"
        printf 'jobs=%s run=%s wall=%.3fs per-tenant=%.2fms cpu(user+sys)=%.2fs\n' "$jobs" "$run" "$wall" \
            "$(awk -v w="$wall" -v n="$tenants" 'BEGIN {print w * 1000 / n}')" "$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')"
        rm -rf "$root"
    done
done
for jobs in 1 2; do
    # shellcheck disable=SC2086
    sorted=$(printf '%s\n' ${times[$jobs]} | sort -n)
    median=$(echo "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    best=$(echo "$sorted" | head -1)
    printf 'jobs=%s median wall=%.3fs (%.2fms per tenant), best %.3fs (%.2fms per tenant)\n' "$jobs" \
        "$median" "$(awk -v w="$median" -v n="$tenants" 'BEGIN {print w * 1000 / n}')" \
        "$best" "$(awk -v w="$best" -v n="$tenants" 'BEGIN {print w * 1000 / n}')"
done
