#!/usr/bin/env bash
# ragline vs Haystack vs txtai on SciFact train, in one run, then the comparison table.
#
#   bash benchmarks/peers/setup.sh              # once: the peers' own virtualenvs
#   bash benchmarks/peers/run.sh                # one after the other (a quiet machine)
#   bash benchmarks/peers/run.sh --parallel     # all at once (a busy shared machine)
#
# Extra arguments after the flag go to every script (e.g. --limit-docs 300 for a
# smoke run). Sequential runs give each system the machine to itself; parallel
# runs give every system the same (contended) conditions and finish ~5x sooner
# on an oversubscribed machine, where the per-process CPU times are the figures
# to compare. The 1-minute load is sampled every 10 s into load.log.
#
# PEERS_NICE=-10 (root, Linux autogroup scheduling) raises the run's share of a
# machine other sessions also load: the kernel splits CPU between sessions, so a
# plain `nice` does nothing. Start it in its own session so only the run is
# raised:  PEERS_NICE=-10 setsid bash benchmarks/peers/run.sh --parallel
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
parallel=0
if [[ "${1:-}" == "--parallel" ]]; then parallel=1; shift; fi
results=benchmarks/results/peers
logs=benchmarks/.work/peers
mkdir -p "$results" "$logs"
peers=benchmarks/peers/.venvs
for venv in haystack txtai; do
  [[ -x "$peers/$venv/bin/python" ]] || { echo "missing $peers/$venv: run benchmarks/peers/setup.sh" >&2; exit 1; }
done

: > "$results/load.log"
( while true; do echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$results/load.log"; sleep 10; done ) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT

names=(ragline ragline-st haystack txtai txtai-exact)
declare -A cmds=(
  [ragline]=".venv/bin/python benchmarks/peers/ragline_scifact.py --embedder onnx"
  [ragline-st]=".venv/bin/python benchmarks/peers/ragline_scifact.py --embedder sentence-transformers"
  [haystack]="$peers/haystack/bin/python benchmarks/peers/haystack_scifact.py"
  [txtai]="$peers/txtai/bin/python benchmarks/peers/txtai_scifact.py"
  [txtai-exact]="$peers/txtai/bin/python benchmarks/peers/txtai_scifact.py --exact"
)
run_mode="$( ((parallel)) && echo parallel || echo sequential )"
if [[ -n "${PEERS_NICE:-}" ]]; then
  echo "$PEERS_NICE" > /proc/self/autogroup
  run_mode="$run_mode; the run's autogroup at nice $PEERS_NICE"
fi
echo "$run_mode" > "$results/run_mode.txt"
started=$(date +%s)
if ((parallel)); then
  pids=()
  for name in "${names[@]}"; do
    # shellcheck disable=SC2086
    ${cmds[$name]} "$@" > "$logs/$name.log" 2>&1 &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  ((status == 0)) || { echo "a peer script failed: see $logs/*.log" >&2; exit 1; }
else
  for name in "${names[@]}"; do
    echo "== $name"
    # shellcheck disable=SC2086
    ${cmds[$name]} "$@" 2>&1 | tee "$logs/$name.log"
  done
fi
echo "all systems done in $(( $(date +%s) - started )) s"
.venv/bin/python benchmarks/peers/compare.py
