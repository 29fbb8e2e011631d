#!/usr/bin/env bash
# Issue 13's embedded-search measurements in one go, for an idle machine: ragline's
# in-process mirror next to the in-memory baseline and txtai (same process, same
# query vectors, paths rotated query by query), search only and end to end, on
# SciFact and on synthetic 10k / 100k / 1M indexes; /api/search throughput at 100k;
# the mirror's peak RSS at 1M; peak memory and disk of ragline, the baseline and txtai
# side by side (footprint.py); the search's fixed cost with and without fusion in the
# store (search_fixed_cost*.md) and the CPU of one /api/search request by part.
# Results go to benchmarks/results/core_*.md.
#
#   WORK=/tmp/prof EVAL_CACHE=/tmp/evalcache TXTAI_SITE=/tmp/txtai bash benchmarks/search_core_run.sh
#
# WORK holds the synthetic indexes (built on first use by profile_search.py, minutes
# at 1M); EVAL_CACHE is `ragline eval --cache-dir`'s folder for SciFact (built by
#   RAGLINE_EVAL_CACHE_DIR=$EVAL_CACHE ragline eval /work/shared/data/scifact --split train);
# TXTAI_SITE a folder with txtai, not a ragline dependency:
#   pip install --no-deps --target $TXTAI_SITE txtai==9.14.0 faiss-cpu==1.15.1 msgpack==1.1.2
# (its other needs — torch, transformers — are in ragline's `st` extra).
# txtai is left out at 1M (its index build takes most of an hour there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${WORK:?set WORK}"
cache="${EVAL_CACHE:?set EVAL_CACHE}"
results="$root/benchmarks/results"
export OPENBLAS_NUM_THREADS=1
export PYTHONPATH="$root/src:${TXTAI_SITE:?set TXTAI_SITE}${PYTHONPATH:+:$PYTHONPATH}"
cd "$root/benchmarks"
uptime
python profile_search.py --cache-dir "$cache" --txtai --no-lancedb --out "$results/core_scifact.md"
python profile_search.py --synthetic 10000 --work-dir "$work" --txtai --no-lancedb \
  --queries 200 --out "$results/core_10000.md"
python search_fixed_cost.py --cache-dir "$cache" --out "$results/search_fixed_cost.md"
python search_fixed_cost.py --index "$work/scale-100000" --pool-index "$work/pool" \
  --out "$results/search_fixed_cost_100000.md"
python api_throughput.py "$work/scale-100000" --pool-index "$work/pool" --out "$results/core_api_100000.md"
rm -f "$results/core_api_request_cost_100000.md"
python api_request_cost.py "$work/scale-100000" --pool-index "$work/pool" \
  --out "$results/core_api_request_cost_100000.md"
{
  echo "Produced by \`/usr/bin/time -v python mirror_memory.py $work/scale-1000000\`" \
    "(benchmarks/search_core_run.sh, run from benchmarks/; the output of both below)."
  /usr/bin/time -v python mirror_memory.py "$work/scale-1000000"
} > "$results/core_memory_1000000.txt" 2>&1
rm -f "$results/core_footprint.md"
python footprint.py --cache-dir "$cache" --label "SciFact (9,133 chunks)" --txtai --out "$results/core_footprint.md"
for n in 10000 100000; do
  python footprint.py "$work/scale-$n" --label "synthetic $n" --txtai --out "$results/core_footprint.md"
done
python footprint.py "$work/scale-1000000" --label "synthetic 1000000" --out "$results/core_footprint.md"
python profile_search.py --synthetic 100000 --work-dir "$work" --txtai --no-lancedb \
  --queries 200 --out "$results/core_100000.md"
python profile_search.py --synthetic 1000000 --work-dir "$work" --no-lancedb --queries 200 \
  --out "$results/core_1000000.md"
uptime
