#!/usr/bin/env bash
# `make mutation` on a machine of many cores and no network (the lent GPU machine): its python3 gets
# what it lacks from wheels carried in .whl/ (installed by pip's own wheel, carried with them and run
# from the zip: a Python made by uv has no pip, and uv's 17 MB wheel would break the 64 MiB a call
# may carry), and the modules of tests/mutation_modules.txt are
# mutated side by side, one per core. A kill rate does not depend on the host's speed, so it may be
# measured there; the harness's own pins are carried where the machine's versions could change an
# outcome (pandas, pydantic, msgspec, pytest, hypothesis; numpy is the machine's own, of the same 2.5 series as
# uv.lock's, which leaves room under the 64 MiB a call may carry).
#
#   scripts/gpu/mutation.sh wheels          # here, with network: download the wheels into .whl/
#   scripts/gpu/mutation.sh run [LINES...]  # there (carry .whl): these lines of the module list, each
#                                           # N or N-M (its comments and blank lines left out; default all)
#
# MUTATION_SAMPLE (50) mutants a module, MUTATION_JOBS (the cores) modules at once; the output goes
# to $OUT/mutation.txt (default gpu-work/out).
set -euo pipefail
cd "$(dirname "$0")/../.."
PIP_WHEEL=pip==25.3  # the installer carried to the machine

pin() {  # NAME==VERSION as uv.lock pins NAME (the last of two: the pin for Python 3.12 and later)
  echo "$1==$(grep -A1 "^name = \"$1\"$" uv.lock | sed -n 's/^version = "\(.*\)"$/\1/p' | tail -1)"
}

wheels() {
  local where=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
               --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
  local ours=() name
  for name in pandas pydantic pydantic-core annotated-types typing-inspection typing-extensions msgspec \
              datasets dill multiprocess pytest pytest-xdist hypothesis typer; do
    ours+=("$(pin "$name")")
  done
  # cosmic-ray as the Makefile pins it, and the dependencies the machine's image does not hold.
  local tool=(cosmic-ray==8.7.0 anybadge==1.16.0 decorator==5.3.2 exit-codes==1.3.0 gitdb==4.0.12
              gitpython==3.2.1 parso==0.8.7 smmap==5.0.3 sqlalchemy==2.1.9 stevedore==5.10.0 toml==0.10.2)
  # pip run through the project's pinned uv (bootstrapped by make when missing): no Python here need hold pip.
  local uv
  uv=${SPARKBENCH_CACHE:-$HOME/.cache/sparkbench}/tools/uv-$(sed -n 's/^required-version = "==\(.*\)"/\1/p' pyproject.toml)/bin/uv
  make -s "$uv"
  mkdir -p .whl
  "$uv" tool run --quiet --from pip pip download -q --no-deps --only-binary=:all: "${where[@]}" -d .whl \
    "${ours[@]}" "${tool[@]}"
  "$uv" tool run --quiet --from pip pip wheel -q --no-deps -w .whl yattag==1.16.1  # a source archive only
  # pip itself, to install the wheels there: a Python made by uv has no pip; a pip wheel runs as a zip.
  "$uv" tool run --quiet --from pip pip download -q --no-deps --only-binary=:all: -d .whl "$PIP_WHEEL"
}

run() {
  local pip=(.whl/pip-*.whl) wheels=()
  for wheel in .whl/*.whl; do [[ $wheel == "${pip[0]}" ]] || wheels+=("$wheel"); done
  python3 "${pip[0]}/pip" install --quiet --no-index --no-deps --no-cache-dir --target /tmp/site "${wheels[@]}"
  export PYTHONPATH=/tmp/site OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  # scripts/mutation.py mutates HEAD, and a copied tree's HEAD (where it has one) need not be what was
  # copied: the tree as it is here is committed first.
  git rev-parse --git-dir >/dev/null 2>&1 || git init -q
  git add -A && git -c user.name=mutation -c user.email=mutation@localhost commit -qm tree --allow-empty
  local out=${OUT:-gpu-work/out} picks="" spec
  for spec in "${@:-1-\$}"; do picks+="${spec/-/,}p;"; done
  mkdir -p "$out"
  mapfile -t modules < <(grep -v -e '^#' -e '^$' tests/mutation_modules.txt | sed -n "$picks")
  python3 -c 'import sys, numpy, pandas, pyarrow, pytest, scipy
print(sys.version.split()[0], *(f"{m.__name__} {m.__version__}" for m in (numpy, pandas, pyarrow, pytest, scipy)))'
  python3 scripts/mutation.py --cosmic-ray /tmp/site/bin/cosmic-ray --sample "${MUTATION_SAMPLE:-50}" \
    --jobs "${MUTATION_JOBS:-$(nproc)}" "${modules[@]}" 2>&1 | tee "$out/mutation.txt"
}

case "${1:-}" in
  wheels) wheels ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 wheels | run [N | N-M ...]" >&2; exit 2 ;;
esac
