#!/usr/bin/env python3
"""The cuda-python peer of the host-callback benchmark: B1 and B2 through cuda.bindings.driver,
measured the way bench/hostcb_c.c measures them (same warm-ups, same counts, a
monotonic clock around the enqueue loop and the final synchronise, every callback counted).

Without --figure, each figure runs in a subprocess of its own, because a captured host function
replayed is known to crash cuda-bindings (the process dies with SIGSEGV); the crash is then the
peer's result. Prints one line per figure, in the format of the project's bench executable:

    RESULT cuda-python driver B1 14.912 min=14.801 max=15.020 reps=3
    RESULT cuda-python driver B2 crashed (signal 11)
    RESULT cuda-python driver B1 unavailable (python3 has no cuda.bindings: ...)
"""

import argparse
import ctypes
import statistics
import subprocess
import sys
import time

FIGURES = ("B1", "B2")
B1_WARMUP = 1000
B2_WARMUP = 100
TIMEOUT_S = 60


class PeerError(Exception):
    """A failed CUDA call or a wrong callback count: the figure has no value."""


def run_figure(figure, n, reps):
    """Measures one figure in this process; returns the per-repetition values in microseconds."""
    from cuda.bindings import driver as cu

    def ck(result, what):
        err = result[0]
        if err != cu.CUresult.CUDA_SUCCESS:
            name = cu.cuGetErrorName(err)[1]
            name = name.decode() if isinstance(name, bytes) else str(name)
            raise PeerError(f"{what} failed with {name} ({int(err)})")
        return result[1] if len(result) > 1 else None

    ck(cu.cuInit(0), "cuInit")
    dev = ck(cu.cuDeviceGet(0), "cuDeviceGet")
    ctx = ck(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    stream = ck(
        cu.cuStreamCreate(int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate"
    )

    # The host function a cuda-python user writes: a Python function behind a ctypes pointer.
    count = [0]

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def on_host(_user_data):
        count[0] += 1

    fn = cu.CUhostFn(ctypes.cast(on_host, ctypes.c_void_p).value)
    ok = cu.CUresult.CUDA_SUCCESS

    def settle(enqueue, warmup, what):
        """The untimed launches before the clock starts, synchronised; then the count is reset."""
        for _ in range(warmup):
            ck(enqueue(), what)
        ck(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        count[0] = 0

    def finish(t0, units):
        ck(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        elapsed = time.perf_counter() - t0
        if count[0] != units:
            raise PeerError(
                f"{figure}: {count[0]} host functions ran where {units} were enqueued; "
                "the timing is discarded"
            )
        return elapsed / units * 1e6

    # The timed loops call the binding directly, as a user's loop would.
    if figure == "B1":
        launch = cu.cuLaunchHostFunc

        def once():
            settle(lambda: launch(stream, fn, 0), B1_WARMUP, "cuLaunchHostFunc")
            t0 = time.perf_counter()
            for _ in range(n):
                r = launch(stream, fn, 0)
                if r[0] != ok:
                    ck(r, "cuLaunchHostFunc")
            return finish(t0, n)

    else:
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
        ck(cu.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")
        ck(cu.cuLaunchHostFunc(stream, fn, 0), "cuLaunchHostFunc (captured)")
        graph = ck(cu.cuStreamEndCapture(stream), "cuStreamEndCapture")
        exe = ck(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        graph_launch = cu.cuGraphLaunch
        m = n // 10

        def once():
            settle(lambda: graph_launch(exe, stream), B2_WARMUP, "cuGraphLaunch")
            t0 = time.perf_counter()
            for _ in range(m):
                r = graph_launch(exe, stream)
                if r[0] != ok:
                    ck(r, "cuGraphLaunch")
            return finish(t0, m)

    once()  # the warm-up repetition
    return [once() for _ in range(reps)]


def child(figure, n, reps):
    """Runs one figure and prints its RESULT line; exit status 1 on an error."""
    try:
        values = run_figure(figure, n, reps)
    except (PeerError, RuntimeError) as e:
        print(f"RESULT cuda-python driver {figure} ERROR {e}", flush=True)
        return 1
    print(
        f"RESULT cuda-python driver {figure} {statistics.median(values):.3f} "
        f"min={min(values):.3f} max={max(values):.3f} reps={len(values)}",
        flush=True,
    )
    return 0


def parent(n, reps):
    """Runs each figure in a subprocess and reports crashes and time-outs as the peer's result."""
    try:
        import cuda.bindings
        from cuda.bindings import driver  # noqa: F401
    except ImportError as e:
        for figure in FIGURES:
            print(f"RESULT cuda-python driver {figure} unavailable (python3 has no cuda.bindings: {e})")
        print("cuda-python peer: install cuda-bindings (pip install cuda-bindings) to compare with it")
        return 0
    print(f"cuda-python peer: cuda-bindings {cuda.bindings.__version__}, python {sys.version.split()[0]}")
    status = 0
    for figure in FIGURES:
        cmd = [sys.executable, __file__, "--figure", figure, "--n", str(n), "--reps", str(reps)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"RESULT cuda-python driver {figure} timed out (after {TIMEOUT_S} s)", flush=True)
            status = 1
            continue
        lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        if done.returncode < 0:
            print(f"RESULT cuda-python driver {figure} crashed (signal {-done.returncode})", flush=True)
        elif lines:
            print(lines[-1], flush=True)
            status |= done.returncode != 0
        else:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"RESULT cuda-python driver {figure} ERROR exit {done.returncode}: {last}", flush=True)
            status = 1
        if done.stderr.strip():
            print(f"cuda-python peer: {figure} stderr:\n{done.stderr.rstrip()}", file=sys.stderr)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="B1 host functions per repetition; B2 launches N/10")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions after one warm-up")
    ap.add_argument("--figure", choices=FIGURES, help="measure this figure in this process")
    args = ap.parse_args()
    if args.n < 10 or args.reps < 1:
        ap.error("--n must be at least 10 and --reps at least 1")
    if args.figure:
        return child(args.figure, args.n, args.reps)
    return parent(args.n, args.reps)


if __name__ == "__main__":
    sys.exit(main())
