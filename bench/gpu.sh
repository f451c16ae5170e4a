#!/usr/bin/env bash
# Host-callback figures on the GPU machine, side by side: the C driver-API reference
# (.gpu/peers/hostcb_c.c), the C runtime-API reference (bench/hostcb_c_runtime.c) and this
# project's bench executable (every target and API) run in interleaved rounds, so that all of
# them share the same conditions over time; then the installed cuda-python once; then one table
# (each figure's median over the rounds, its min..max, and ours/C against the matching C).
#
#   here, at the repository root:         tools/gpu-bundle --benches
#   on the GPU machine, from the root:    bash bench/gpu.sh        (device tool: carry [".gpu"])
#
# Each round runs C driver once, C runtime once, then ours once with --reps 1 (every row, each
# figure after its usual warm-up), all pinned to the same CPUs.
# Environment: OUT (where the logs and table.txt go; default .gpu/bench), ROUNDS (default 5),
# N (B1's host functions, default 100000; B2 launches N/10 graphs, B3 N/10/64+1), PIN (the CPU
# list given to `taskset -c` for every program, default 2-5; empty: no pinning), BUDGET (seconds
# the whole script may take, default 270). With the defaults it takes about 2 minutes. Each part
# has a time-out (builds 120 s, C 30 s a run, ours 120 s a round, cuda-python 130 s), and no part
# starts past the budget: rounds stop 60 s before it, leaving that to cuda-python and the table.
# It writes 7 files to OUT: machine.txt, build.log, c.log, crt.log, ours.log, peer.log, table.txt.
# Exit status: 0 when both C references and ours ran in every round and every figure of ours has
# a value; 1 otherwise (a missing nvcc included). cuda-python's crash, or its absence, is its result.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

out=${OUT:-.gpu/bench}
rounds=${ROUNDS:-5}
n=${N:-100000}
pin_cpus=${PIN-2-5}
budget=${BUDGET:-270}
rounds_end=$((budget - 60))
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export REQUIRE_GPU=1
status=0
notes=$(mktemp)
trap 'rm -f "$notes"' EXIT

say() { echo "gpu.sh: $*" | tee -a "$notes" >&2; }
step() { echo "gpu.sh: [$1/5] $2 (${SECONDS}s)" >&2; }
# The time-out for a part whose own limit is $1 seconds, cut to what is left before $2 (seconds
# since the start); 0 when nothing is left (never pass 0 to timeout: it would mean no limit).
limit() {
  local left=$(($2 - SECONDS))
  if [ "$left" -lt 1 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# Runs "$@" under a time-out of $1 seconds, pinned; $1 = 0 runs nothing and fails.
run_capped() {
  local secs=$1
  shift
  [ "$secs" -gt 0 ] || return 125
  timeout -k 5 "$secs" ${pin[@]+"${pin[@]}"} "$@"
}

# Pinning: every program on the same CPUs, so that the driver's callback thread lands alike.
pin=()
pin_text="none (PIN is empty)"
if [ -n "$pin_cpus" ]; then
  if ! command -v taskset > /dev/null; then
    pin_text="none (taskset not found)"
    say "pinning: taskset not found; the programs run unpinned"
  elif ! taskset -c "$pin_cpus" true 2> /dev/null; then
    pin_text="none (taskset -c $pin_cpus failed on this machine)"
    say "pinning: 'taskset -c $pin_cpus' failed (CPUs 0..$(($(nproc) - 1)) here); the programs run unpinned"
  else
    pin=(taskset -c "$pin_cpus")
    pin_text="taskset -c $pin_cpus"
  fi
fi

{
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null \
    || echo "nvidia-smi: not available"
  echo "cpus: $(nproc) online; pinning: $pin_text"
} > "$out/machine.txt"
: > "$out/build.log"
: > "$out/c.log"
: > "$out/crt.log"
: > "$out/ours.log"
: > "$out/peer.log"

# 1. Build both C references with nvcc (CUDA's own, /usr/local/cuda on the GPU machine).
step 1 "C references: build with nvcc"
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
c_src=""
for candidate in .gpu/peers/hostcb_c.c bench/hostcb_c.c; do
  [ -f "$candidate" ] && c_src=$candidate && break
done
c_drv="" c_rt=""
if [ -z "$nvcc" ]; then
  say "C references: nvcc not found (PATH, /usr/local/cuda/bin); the C columns stay empty"
  status=1
else
  if [ -z "$c_src" ]; then
    say "C driver reference: .gpu/peers/hostcb_c.c is missing; run tools/gpu-bundle --benches first"
    status=1
  elif echo "== $nvcc -O2 -o /tmp/hostcb_c $c_src -lcuda" >> "$out/build.log" \
    && timeout 120 "$nvcc" -O2 -o /tmp/hostcb_c "$c_src" -lcuda >> "$out/build.log" 2>&1; then
    c_drv=/tmp/hostcb_c
  else
    say "C driver reference: nvcc failed; see build.log"
    status=1
  fi
  # --cudart shared: libcudart.so, as our runtime rows load it (nvcc links it statically by default).
  if echo "== $nvcc -O2 --cudart shared -o /tmp/hostcb_c_runtime bench/hostcb_c_runtime.c -lcudart" >> "$out/build.log" \
    && timeout 120 "$nvcc" -O2 --cudart shared -o /tmp/hostcb_c_runtime bench/hostcb_c_runtime.c -lcudart \
      >> "$out/build.log" 2>&1; then
    c_rt=/tmp/hostcb_c_runtime
    { echo "== ldd /tmp/hostcb_c_runtime | grep cudart"; ldd /tmp/hostcb_c_runtime | grep cudart; } >> "$out/build.log" 2>&1
  else
    say "C runtime reference: nvcc failed; see build.log"
    status=1
  fi
fi

# 2. Ours: the bench target 'hostcb' as gpu-bundle listed it (else the first .gpu/bin/hostcb-*).
step 2 "ours: find the bench executable"
[ -d .gpu/bin ] || [ ! -f .gpu/bin.tar.gz ] || tar -xzf .gpu/bin.tar.gz -C .gpu
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
  say "ours: no bench executable in .gpu/bin; run tools/gpu-bundle --benches first"
  exe=""
  status=1
fi

# 3. The rounds: C driver, C runtime, ours (--reps 1), each once a round; every log gets a
#    'ROUND r' line first, so that the table can pair ours with C within a round.
step 3 "$rounds rounds of: C driver, C runtime, ours --reps 1 (pinning: $pin_text)"
# $1: label, $2: log, $3: own time-out, then the command.
run_part() {
  local label=$1 log=$2 own=$3 secs rc
  shift 3
  secs=$(limit "$own" "$rounds_end")
  run_capped "$secs" "$@" >> "$log" 2>&1
  rc=$?
  case $rc in
    0) return 0 ;;
    124 | 137) say "$label: round $r timed out after ${secs}s; see $(basename "$log")" ;;
    125) say "$label: round $r not run: the time budget is spent" ;;
    *) say "$label: round $r failed (exit $rc: $(tail -n 1 "$log" | cut -c1-200)); see $(basename "$log")" ;;
  esac
  status=1
}
done_rounds=0
for r in $(seq "$rounds"); do
  if [ $((rounds_end - SECONDS)) -lt 20 ]; then
    say "rounds: stopped after $done_rounds of $rounds: less than 20 s left of the round budget (BUDGET=$budget)"
    break
  fi
  for log in c crt ours; do echo "ROUND $r" >> "$out/$log.log"; done
  [ -n "$c_drv" ] && run_part "C driver" "$out/c.log" 30 "$c_drv" "$n"
  [ -n "$c_rt" ] && run_part "C runtime" "$out/crt.log" 30 "$c_rt" "$n"
  [ -n "$exe" ] && run_part "ours" "$out/ours.log" 120 "$exe" --reps 1 --n "$n"
  done_rounds=$r
  echo "gpu.sh: round $r of $rounds done (${SECONDS}s)" >&2
done

# 4. cuda-python, B1 and B2, each in its own subprocess (B2 is expected to crash there).
step 4 "cuda-python: B1 and B2"
if ! command -v python3 > /dev/null; then
  say "cuda-python: python3 not found; no peer column and no table"
  grep -h '^RESULT' "$out/ours.log" | tee "$out/table.txt"
  exit 1
fi
secs=$(limit 130 "$budget")
if [ "$secs" -lt 10 ]; then
  say "cuda-python: not run: the time budget is spent"
else
  run_capped "$secs" python3 bench/peer_cuda_python.py --n "$n" --reps 3 > "$out/peer.log" 2>&1
  case $? in
    0) ;;
    124 | 137) say "cuda-python: timed out after ${secs}s; see peer.log" ;;
    *) say "cuda-python: the peer reported an error; see peer.log" ;;
  esac
  grep -q 'unavailable' "$out/peer.log" && say "cuda-python: $(grep -m1 'unavailable' "$out/peer.log")"
fi

# 5. One table, with the notes under it.
step 5 "table"
{
  python3 bench/gpu_table.py --ours "$out/ours.log" --c "$out/c.log" --crt "$out/crt.log" \
    --peer "$out/peer.log" --machine "$out/machine.txt" \
    --setup "$done_rounds rounds, each: C driver, C runtime, ours --reps 1 (every row), N=$n; pinning: $pin_text"
  if [ -s "$notes" ]; then
    printf '\nnotes:\n'
    cat "$notes"
  fi
  echo "gpu.sh: ${SECONDS}s in all, exit status $status"
} > "$out/table.txt"
cat "$out/table.txt"
exit $status
