#!/usr/bin/env bash
# The GPU recipe: llama.cpp built with CUDA from the pinned source, a random Qwen3-MoE converted to
# GGUF, and sparkbench's synthetic workload against it at concurrency 1 and 32, then a speculative
# server whose acceptance is set by --spec-synth-len (a known answer for the accept length).
#
#   scripts/gpu/h200.sh build    # compile llama-server, make the models (about 6 minutes on an H200)
#   scripts/gpu/h200.sh testbed  # the llama.cpp end-to-end tests and fixture recording on this build
#   scripts/gpu/h200.sh bench    # the benchmark runs (build first when its outputs are missing)
#   scripts/gpu/h200.sh nightly  # the nightly gate's proof (scripts/nightly_proof.py) on MoE models of
#                                # 24 and 27 layers (25 and 26 for the detection curve), then `table`
#   scripts/gpu/h200.sh headroom # the client's chunks/s with --processes 1, 2, 4, 8 (scripts/client_headroom.py)
#   scripts/gpu/h200.sh carry    # llama-server, gzipped and split into 15 MB parts, to $OUT (PREBUILT= later)
#   scripts/gpu/h200.sh timeline # a short run sampled over time: GPU state (NVML) and /metrics, the timeline figure
#
# Run from the repository root. The machine needs no network: the source comes as the stripped
# archive gpu-carry/llama.cpp-src.tar.gz (`python -m harness.testbed.llamacpp pack
# gpu-carry/llama.cpp-src.tar.gz`, about 10 MB); python3 must have torch and transformers, and
# gets the packages it lacks from gpu-carry/wheels (pip download, see docs/gpu-h200.md).
# Everything is written under gpu-work/ (kept between calls); the logs (as logs-STAGE.tar.gz), the
# recorded fixtures and the results (as tar.gz) go to $OUT (default gpu-work/out). GPU=0 is the
# dry run on a CPU machine: no CUDA, a 2-layer model, small shapes, same steps; PREBUILT=path/to/llama-server skips the compile (configure still runs).
# PYTHON makes the models (torch, transformers); BENCH_PYTHON (default: PYTHON) runs sparkbench.
# NO_MOE=1 builds without the MoE (enough for the testbed stage). The source tree is unpacked into
# $WORK/llama.cpp and marked; a tree there without the mark (someone else's) is never deleted.
# nightly: DEPTHS (default "24 27 25 26": base, slow, then the curve), EXPERTS (default 16: a
# 2.2 B-parameter model of the same layer shape, quicker to make), NIGHTS (10), NIGHT_BUDGET_S;
# NIGHTLY_MODELS=1 makes its models during the build stage, beside the compile.
set -euo pipefail

GPU=${GPU:-1}
WORK=${WORK:-$PWD/gpu-work}
OUT=${OUT:-$WORK/out}
ARCHIVE=${ARCHIVE:-$PWD/gpu-carry/llama.cpp-src.tar.gz}
PYTHON=${PYTHON:-python3}
BENCH_PYTHON=${BENCH_PYTHON:-$PYTHON}
PREBUILT=${PREBUILT:-}
PORT=${PORT:-18080}
SYNTH_LEN=${SYNTH_LEN:-3.0}
DRAFT_MAX=${DRAFT_MAX:-3}
FIXTURE_TAG=${FIXTURE_TAG:-$([[ $GPU == 1 ]] && echo cuda || echo cpu)}
if [[ $GPU == 1 ]]; then
  LAYERS=${LAYERS:-24}; IN=${IN:-32768}; OUTTOK=${OUTTOK:-2048}; N1=${N1:-4}; N32=${N32:-32}; C32=${C32:-32}
  CMAKE_GPU=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90); SERVER_GPU=(-ngl all)
else
  LAYERS=${LAYERS:-2}; IN=${IN:-256}; OUTTOK=${OUTTOK:-32}; N1=${N1:-2}; N32=${N32:-4}; C32=${C32:-4}
  CMAKE_GPU=(); SERVER_GPU=()
fi
SRC=$WORK/llama.cpp
SERVER=$SRC/build/bin/llama-server
TINY=$WORK/tiny
DRAFT=$WORK/draft-q8_0.gguf
MOE_HF=$WORK/moe-hf
MOE=$WORK/moe-bf16.gguf
SITE=$WORK/site
MARK=.unpacked-by-h200-sh  # in $SRC: this script unpacked the tree, and may replace it
DEPTHS=${DEPTHS:-24 27 25 26}
EXPERTS=${EXPERTS:-16}
export PYTHONPATH=$PWD:$SITE PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
LOGS=$WORK/logs
mkdir -p "$WORK" "$OUT" "$LOGS"
# Python packages sparkbench needs that the machine's image lacks (pydantic and its own needs)
# travel as wheels in gpu-carry/wheels and are unpacked into $SITE, which is on PYTHONPATH.
if compgen -G "$PWD/gpu-carry/wheels/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "$PWD"/gpu-carry/wheels/*.whl
fi
# Whatever ends the stage, its logs come back as one archive (the device returns few files).
STAGE=${1:-none}
trap 'tar czf "$OUT/logs-$STAGE.tar.gz" -C "$WORK" logs' EXIT

stamp() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOGS/timeline.log"; }

convert() {  # HF_DIR OUTFILE OUTTYPE: the pinned converter, with the BPE pre-tokenizer named
  "$PYTHON" harness/testbed/convert_gguf.py "$SRC" gpt-2 "$1" --outfile "$2.partial" --outtype "$3" \
    >>"$LOGS/convert.log" 2>&1
  mv "$2.partial" "$2"
}

start_build() {  # configure now, compile in the background; `wait_build` joins it
  [[ -x $SERVER ]] && return
  if [[ -e $SRC && ! -f $SRC/$MARK ]]; then
    echo "$SRC exists and was not unpacked by this script: move it away or set WORK" >&2; exit 1
  fi
  rm -rf "$SRC" && tar xzf "$ARCHIVE" -C "$WORK" && touch "$SRC/$MARK"
  cmake -S "$SRC" -B "$SRC/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${CMAKE_GPU[@]}" \
    >"$LOGS/cmake.log" 2>&1
  if [[ -n $PREBUILT ]]; then mkdir -p "$(dirname "$SERVER")" && cp "$PREBUILT" "$SERVER"; return; fi
  stamp "compiling llama-server"
  ( start=$SECONDS; cmake --build "$SRC/build" --target llama-server -j "$(nproc)" >"$LOGS/build.log" 2>&1
    echo "llama-server compiled in $((SECONDS - start)) s on $(nproc) cores" >>"$LOGS/build.log" ) &
  BUILD_PID=$!
}

wait_build() {
  if [[ -n ${BUILD_PID:-} ]]; then
    wait "$BUILD_PID" || { tail -30 "$LOGS/build.log"; exit 1; }
    stamp "$(tail -1 "$LOGS/build.log")"
  fi
  [[ -x $SERVER ]] || { echo "no llama-server at $SERVER" >&2; exit 1; }
}

make_models() {
  if [[ ! -f $DRAFT ]]; then
    "$PYTHON" harness/testbed/build_tiny_model.py workloads/data/gsm8k/test.jsonl "$TINY" >"$LOGS/tiny.log" 2>&1
    convert "$TINY" "$DRAFT" q8_0
    stamp "draft model ready (tiny Llama, q8_0)"
  fi
  if [[ ! -f $MOE && -z ${NO_MOE:-} ]]; then
    "$PYTHON" scripts/gpu/build_random_moe.py "$TINY" "$MOE_HF" --layers "$LAYERS" \
      --device "$([[ $GPU == 1 ]] && echo cuda || echo cpu)" 2>&1 | tee "$LOGS/moe.log" | tail -1
    convert "$MOE_HF" "$MOE" bf16
    rm -rf "$MOE_HF"
    stamp "MoE ready: $(du -h "$MOE" | cut -f1)"
  fi
  if [[ -n ${NIGHTLY_MODELS:-} ]]; then  # the nightly proof's models, made beside the compile
    for depth in $DEPTHS; do moe_gguf "$depth" >/dev/null; done
  fi
}

build() {
  stamp "build stage (GPU=$GPU)"
  [[ $GPU == 1 ]] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/gpu.txt"
  start_build
  make_models &  # in its own process, so that set -e stops it at a failure and the compile goes on
  wait $! || stamp "making the models failed: see the logs"
  wait_build
}

serve() {  # LOGNAME ARGS...: start llama-server on the MoE and wait until it is healthy
  local name=$1; shift
  "$SERVER" -m "$MOE" --host 127.0.0.1 --port "$PORT" --metrics "${SERVER_GPU[@]}" "$@" \
    >"$LOGS/server-$name.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 600); do
    healthy && { stamp "server $name up"; return; }
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -30 "$LOGS/server-$name.log"; exit 1; }
    sleep 0.5
  done
  echo "server $name never became healthy" >&2; exit 1
}

healthy() {
  "$BENCH_PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
    "http://127.0.0.1:$PORT/health" 2>/dev/null
}

unserve() { kill "$SERVER_PID"; wait "$SERVER_PID" || true; }

synthetic() {  # LABEL PROMPTS CONCURRENCY: one sparkbench run, with the client's CPU time measured
  stamp "synthetic $1: $2 prompts of $IN in / $OUTTOK out at concurrency $3"
  "$BENCH_PYTHON" scripts/gpu/client_cost.py "$WORK/results/$1" -- \
    "$BENCH_PYTHON" -m harness.cli run synthetic --server "http://127.0.0.1:$PORT" --tokenizer "$TINY" \
    --num-prompts "$2" --concurrency "$3" --input-tokens "$IN" --output-tokens "$OUTTOK" \
    --results "$WORK/results/$1" --no-progress 2>&1 | tee -a "$LOGS/bench.log"
}

bench() {
  [[ -x $SERVER && -f $MOE && -f $DRAFT ]] || build
  rm -rf "$WORK/results"
  local slot_ctx=$((IN + OUTTOK + 64))
  serve plain -np "$C32" -c $((slot_ctx * C32))
  synthetic c1 "$N1" 1
  synthetic c32 "$N32" "$C32"
  unserve
  serve synth -np 1 -c "$slot_ctx" -md "$DRAFT" "${SERVER_GPU[@]/-ngl/-ngld}" --spec-type draft-simple \
    --spec-draft-n-max "$DRAFT_MAX" --spec-synth-len "$SYNTH_LEN"
  synthetic "synth$SYNTH_LEN" "$N1" 1
  unserve
  for run in "$WORK"/results/*/*/; do "$BENCH_PYTHON" -m harness.cli summarize "$run" >>"$LOGS/summaries.txt" 2>&1; done
  tar czf "$OUT/results.tar.gz" -C "$WORK" results
  stamp "bench stage done"
}

moe_gguf() {  # LAYERS: the random MoE of that depth and $EXPERTS experts as GGUF (made once)
  local gguf=$WORK/moe-$1l-$EXPERTS-bf16.gguf hf=$WORK/moe-$1l-hf
  if [[ ! -f $gguf ]]; then
    "$PYTHON" scripts/gpu/build_random_moe.py "$TINY" "$hf" --layers "$1" --experts "$EXPERTS" \
      --device "$([[ $GPU == 1 ]] && echo cuda || echo cpu)" >>"$LOGS/moe.log" 2>&1
    convert "$hf" "$gguf" bf16
    rm -rf "$hf"
    stamp "MoE $1 layers ready: $(du -h "$gguf" | cut -f1)" >&2
  fi
  echo "$gguf"
}

nightly() {  # the gate's proof: base = first depth, slow = second, the rest for the curve
  [[ -x $SERVER && -f $DRAFT ]] || NO_MOE=1 build
  local models=() names=(base slow) i=0 depth
  for depth in $DEPTHS; do
    models+=(--model "${names[$i]:-layers-$depth}=$(moe_gguf "$depth")"); i=$((i + 1))
  done
  rm -rf "$WORK/proof"
  stamp "nightly proof: ${models[*]}"
  "$BENCH_PYTHON" scripts/nightly_proof.py run --venue gpu --work "$WORK/proof" --llama-server "$SERVER" \
    --tokenizer "$TINY" --nights "${NIGHTS:-10}" --budget-s "${NIGHT_BUDGET_S:-inf}" "${models[@]}" 2>&1 \
    | tee "$LOGS/proof.log"
  tar czf "$OUT/proof.tar.gz" -C "$WORK" --exclude=proof/state/reports proof  # reports: 55 MB of HTML
  stamp "nightly proof done (tables: scripts/nightly_proof.py table --work proof)"
}

headroom() {
  "$BENCH_PYTHON" scripts/client_headroom.py --out "$WORK/headroom.jsonl" 2>&1 | tee "$LOGS/headroom.log"
}

carry() {  # the compiled server back through $OUT (16 MB per file there)
  [[ -x $SERVER ]] || { echo "no llama-server at $SERVER" >&2; exit 1; }
  gzip -c "$SERVER" | split -b 15M - "$OUT/llama-server.gz.part-"
  ls -la "$OUT"
}

testbed() {  # the tests' own servers from this build (GPU-offloaded by default), in a cache of ours
  export SPARKBENCH_CACHE=$WORK/cache
  "$PYTHON" scripts/gpu/install_testbed.py "$SERVER" "$SRC" >"$LOGS/testbed.log" 2>&1
  "$BENCH_PYTHON" scripts/record_llamacpp_fixtures.py "$WORK/fixtures" "$FIXTURE_TAG" >>"$LOGS/testbed.log" 2>&1
  tar czf "$OUT/fixtures.tar.gz" -C "$WORK" fixtures
  stamp "end-to-end tests (tests/e2e/test_llamacpp.py)"
  "$BENCH_PYTHON" -m pytest tests/e2e/test_llamacpp.py -q -x -p no:cacheprovider 2>&1 | tail -25 | tee "$LOGS/e2e.log"
}

timeline() {  # llama.cpp CUDA with --metrics, a short synthetic run at concurrency 4 sampled every
  # TL_SCRAPE s (NVML device state and the server's /metrics), then the timeline figure and what the
  # GPU did during the decode. TL_SERVER (default: the build, or PREBUILT) serves TL_MODEL (default:
  # the MoE), whose tokenizer folder is TL_TOKENIZER (default: the tiny model's).
  local server=${TL_SERVER:-${PREBUILT:-$SERVER}} model=${TL_MODEL:-$MOE} tokenizer=${TL_TOKENIZER:-$TINY}
  local prompts=${TL_PROMPTS:-8} in=${TL_IN:-512} out=${TL_OUT:-2048}
  [[ -x $server && -f $model ]] || { echo "timeline needs a llama-server ($server) and a GGUF ($model)" >&2; exit 1; }
  SERVER=$server MOE=$model serve timeline -np 4 -c $(((in + out + 64) * 4))
  stamp "timeline: $prompts prompts of $in in / $out out at concurrency 4"
  rm -rf "$WORK/timeline"
  "$BENCH_PYTHON" -m harness.cli run synthetic --server "http://127.0.0.1:$PORT" --tokenizer "$tokenizer" \
    --num-prompts "$prompts" --concurrency 4 --input-tokens "$in" --output-tokens "$out" \
    --scrape-interval "${TL_SCRAPE:-0.25}" --results "$WORK/timeline" --no-progress 2>&1 | tee -a "$LOGS/timeline-run.log"
  unserve
  "$BENCH_PYTHON" scripts/gpu/timeline_report.py "$WORK/timeline" "$OUT" 2>&1 | tee "$OUT/timeline.txt"
  tar czf "$OUT/timeline-run.tar.gz" -C "$WORK" timeline
  stamp "timeline stage done"
}

case ${1:-} in
  build) build ;;
  testbed) testbed ;;
  bench) bench ;;
  nightly) nightly ;;
  headroom) headroom ;;
  carry) carry ;;
  timeline) timeline ;;
  *) echo "usage: $0 build|testbed|bench|nightly|headroom|carry|timeline" >&2; exit 2 ;;
esac
