#!/usr/bin/env bash
# Host-callback figures on the GPU machine, side by side in one run: the C reference
# (.gpu/peers/hostcb_c.c), this project's bench executable (every target and API), and the
# installed cuda-python; then one table (figure, ours, C, cuda-python, ours/C).
#
#   here, at the repository root:         ../shared/tools/gpu-bundle --benches
#   on the GPU machine, from the root:    bash bench/gpu.sh        (device tool: carry [".gpu"])
#
# Environment: OUT (where every log and table.txt go; default .gpu/bench), REPS (repetitions of
# each figure and runs of the C reference, default 5), N (B1's host functions, default 100000;
# B2 launches N/10 graphs, B3 N/10/64+1). With the defaults it takes about a minute; each part
# has a time-out (C 30 s a run, ours 240 s, cuda-python 60 s a figure), so it stays under 9 min.
# Exit status: 0 when the C reference and ours ran and every figure of ours has a value; 1
# otherwise (a missing nvcc included). cuda-python's crash, or its absence, is its result.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

out=${OUT:-.gpu/bench}
reps=${REPS:-5}
n=${N:-100000}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export REQUIRE_GPU=1
status=0

say() { echo "gpu.sh: $*" | tee -a "$out/notes.txt" >&2; }
step() { echo "gpu.sh: [$1/4] $2" >&2; }

{
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null \
    || echo "nvidia-smi: not available"
} > "$out/machine.txt"
: > "$out/notes.txt"
: > "$out/c.log"
: > "$out/ours.log"
: > "$out/peer.log"

# 1. The C reference, built here and run REPS times (the table takes the median of each figure).
step 1 "C reference: build with nvcc, run $reps times"
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ ! -f .gpu/peers/hostcb_c.c ]; then
  say "C reference: .gpu/peers/hostcb_c.c is missing; run ../shared/tools/gpu-bundle --benches first"
  status=1
elif [ -z "$nvcc" ]; then
  say "C reference: nvcc not found (PATH, /usr/local/cuda/bin); the C column stays empty"
  status=1
elif ! "$nvcc" -O2 -o /tmp/hostcb_c .gpu/peers/hostcb_c.c -lcuda > "$out/c-build.log" 2>&1; then
  say "C reference: nvcc failed; see c-build.log"
  status=1
else
  for i in $(seq "$reps"); do
    if ! timeout 30 /tmp/hostcb_c "$n" >> "$out/c.log" 2>&1; then
      say "C reference: run $i failed; see c.log"
      status=1
    fi
  done
fi

# 2. Ours: the bench target 'hostcb' as gpu-bundle listed it (else the first .gpu/bin/hostcb-*).
step 2 "ours: every target and API, $reps repetitions of each figure"
exe=""
if [ -f .gpu/list ]; then
  built=$(awk '$1 == "hostcb" { print $2; exit }' .gpu/list)
  [ -n "$built" ] && exe=".gpu/bin/$(basename "$built")"
fi
if [ -z "$exe" ] || [ ! -x "$exe" ]; then
  for candidate in .gpu/bin/hostcb-*; do
    [ -x "$candidate" ] && exe=$candidate && break
  done
fi
if [ -z "$exe" ] || [ ! -x "$exe" ]; then
  say "ours: no bench executable in .gpu/bin; run ../shared/tools/gpu-bundle --benches first"
  status=1
elif ! timeout 240 "$exe" --reps "$reps" --n "$n" > "$out/ours.log" 2>&1; then
  say "ours: $exe failed ($(tail -n 1 "$out/ours.log" | cut -c1-300)); see ours.log"
  status=1
fi

# 3. cuda-python, B1 and B2, each in its own subprocess (B2 is expected to crash there).
step 3 "cuda-python: B1 and B2"
if ! command -v python3 > /dev/null; then
  say "cuda-python: python3 not found; no peer column and no table"
  grep -h '^RESULT' "$out/ours.log" | tee "$out/table.txt"
  exit 1
fi
python3 bench/peer_cuda_python.py --n "$n" --reps 3 > "$out/peer.log" 2> "$out/peer-stderr.log" \
  || { say "cuda-python: the peer reported an error; see peer.log"; status=1; }
grep -q 'unavailable' "$out/peer.log" && say "cuda-python: $(grep -m1 'unavailable' "$out/peer.log")"

# 4. One table.
step 4 "table"
python3 bench/gpu_table.py --ours "$out/ours.log" --c "$out/c.log" --peer "$out/peer.log" \
  --machine "$out/machine.txt" | tee "$out/table.txt"
if [ -s "$out/notes.txt" ]; then
  printf '\nnotes:\n'
  cat "$out/notes.txt"
fi
exit $status
