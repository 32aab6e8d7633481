#!/usr/bin/env bash
# Two nimble_soak processes at once over one fresh disk-cache directory.
#   test/soak/run.sh <nimble_soak> <seconds> <threads> <scratch directory>
# Fails if either fails, or if the directory ends above twice the size
# limit (a store evicts after writing, and several may be in flight).
set -euo pipefail
soak="$1" seconds="$2" threads="$3" dir="$4"
limit=$((256 << 10))
rm -rf "$dir"
"$soak" "$seconds" "$threads" "$dir" "$limit" & first=$!
"$soak" "$seconds" "$threads" "$dir" "$limit" & second=$!
rc=0
wait "$first" || rc=1
wait "$second" || rc=1
# A store evicts down to 90% of the limit after writing; one entry may be in
# flight per thread of each process.
kept=$(find "$dir" -name '*.nkc' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
echo "run.sh: ${kept} bytes of entries left (limit ${limit})"
if ((kept > 2 * limit)); then
  echo "run.sh: the cache grew past its limit" >&2
  rc=1
fi
rm -rf "$dir"
exit "$rc"
