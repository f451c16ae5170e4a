//! Waiting for a stream, three ways, side by side: `cuStreamSynchronize`, `cuStreamQuery`
//! polled in a spin loop, and the safe layer's `Stream::completion()` future (woken by a host
//! function; the waiting thread parks, nothing polls), for every target's safe layer.
//!
//! Each wait follows a 4-byte `cuMemsetD32Async` on the stream. The methods run in interleaved
//! rounds (sync, query, future, then again), so they share conditions over time. Per method it
//! prints the median and the 99th percentile of the wall time of one enqueue-and-wait, and the
//! CPU time per wait of the whole process (CUDA's own threads included) and of the waiting
//! thread alone (`clock_gettime`, `CLOCK_PROCESS_CPUTIME_ID` / `CLOCK_THREAD_CPUTIME_ID`).
//!
//! usage: completion-<hash> [--rounds R] [--waits W] [FILTER...]   (defaults 5 and 2000). A
//! FILTER that matches neither "completion" nor a target name skips the run (so that a test
//! filter given to every bundled executable does not start it). Without a usable GPU it prints
//! SKIP and exits 0, or exits 1 when `REQUIRE_GPU=1`.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use hostcb_bench::gpu::{self, Gate};

/// Wakes the thread that blocks on a future.
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The smallest executor: polls on this thread, parks until woken (a tiny `block_on`, rather
/// than a dependency on an async runtime, so the figure is the future's and the wake's alone).
fn block_on<F: Future>(future: F) -> F::Output {
    let unpark = Arc::new(Unpark {
        thread: thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(Arc::clone(&unpark));
    let mut cx = TaskContext::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        while !unpark.woken.swap(false, Ordering::Acquire) {
            thread::park();
        }
    }
}

/// CPU time of `clock` in nanoseconds.
fn cpu_ns(clock: libc::clockid_t) -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; both clocks exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// What one method measured over every round.
#[derive(Default)]
struct Tally {
    /// Wall time of each enqueue-and-wait, in nanoseconds.
    waits: Vec<u64>,
    process_cpu_ns: u128,
    thread_cpu_ns: u128,
    wall_ns: u128,
}

impl Tally {
    /// The table row, and the median in microseconds.
    fn row(&mut self, name: &str) -> (String, f64) {
        self.waits.sort_unstable();
        let n = self.waits.len().max(1);
        let at = |q: f64| {
            self.waits
                .get(((n - 1) as f64 * q) as usize)
                .map_or(0.0, |&w| w as f64 / 1000.0)
        };
        let per = |ns: u128| ns as f64 / 1000.0 / n as f64;
        let row = format!(
            "{name:<28} {:>10.2} {:>10.2} {:>14.2} {:>14.2} {:>10.0}%",
            at(0.5),
            at(0.99),
            per(self.process_cpu_ns),
            per(self.thread_cpu_ns),
            100.0 * self.process_cpu_ns as f64 / self.wall_ns.max(1) as f64
        );
        (row, at(0.5))
    }
}

/// Runs `waits` enqueue-and-wait steps of one method into `tally`.
fn batch(
    tally: &mut Tally,
    waits: usize,
    mut step: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let (p0, t0, w0) = (
        cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
        cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
        Instant::now(),
    );
    for _ in 0..waits {
        let start = Instant::now();
        step()?;
        tally.waits.push(start.elapsed().as_nanos() as u64);
    }
    tally.wall_ns += w0.elapsed().as_nanos();
    tally.process_cpu_ns += cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - p0;
    tally.thread_cpu_ns += cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t0;
    Ok(())
}

/// One target's table.
macro_rules! target_table {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        mod $target {
            use super::*;
            use cuda_hostcb_safe::$target::{Context, Stream, sys};

            pub const NAME: &str = stringify!($target);

            pub fn table(ordinal: usize, rounds: usize, waits: usize) -> Result<String, String> {
                let e = |e: &dyn std::fmt::Display| e.to_string();
                let ctx = Context::primary(ordinal).map_err(|x| e(&x))?;
                ctx.make_current().map_err(|x| e(&x))?;
                let stream = Stream::new(&ctx).map_err(|x| e(&x))?;
                let mut dev: sys::CUdeviceptr = 0;
                unsafe { sys::cuMemAlloc(&mut dev, 4) }.map_err(|x| e(&x))?;
                let raw = stream.as_raw();
                let work = |v: u32| unsafe { sys::cuMemsetD32Async(dev, v, 1, raw) }.map_err(|x| e(&x));
                let not_ready = sys::CUresult::CUDA_ERROR_NOT_READY.0;
                // sync, query, future
                let mut tallies: [Tally; 3] = Default::default();
                let outcome = (|| -> Result<(), String> {
                    // Round 0 warms up and is not counted.
                    for round in 0..=rounds {
                        let mut warm: [Tally; 3] = Default::default();
                        let t = if round == 0 { &mut warm } else { &mut tallies };
                        batch(&mut t[0], waits, || {
                            work(1)?;
                            stream.synchronize().map_err(|x| e(&x))
                        })?;
                        batch(&mut t[1], waits, || {
                            work(2)?;
                            loop {
                                match unsafe { sys::cuStreamQuery(raw) } {
                                    Ok(()) => return Ok(()),
                                    Err(x) if x.code() == Some(not_ready) => std::hint::spin_loop(),
                                    Err(x) => return Err(e(&x)),
                                }
                            }
                        })?;
                        batch(&mut t[2], waits, || {
                            work(3)?;
                            let done = stream.completion().map_err(|x| e(&x))?;
                            block_on(done).map_err(|x| e(&x))
                        })?;
                    }
                    Ok(())
                })();
                let _ = unsafe { sys::cuMemFree(dev) };
                outcome?;
                let [sync, query, future] = &mut tallies;
                let (sync_row, sync_p50) = sync.row("cuStreamSynchronize");
                let (query_row, query_p50) = query.row("cuStreamQuery spin");
                let (future_row, future_p50) = future.row("Stream::completion future");
                let out = format!(
                    "{NAME}: {rounds} rounds x {waits} waits per method, each after a 4-byte memset\n\
                     {:<28} {:>10} {:>10} {:>14} {:>14} {:>11}\n{sync_row}\n{query_row}\n{future_row}\n\
                     p50 latency against cuStreamSynchronize: query {:.2}, future {:.2}\n",
                    "method", "p50 us", "p99 us", "process CPU us", "waiter CPU us", "CPU/wall",
                    query_p50 / sync_p50.max(1e-9),
                    future_p50 / sync_p50.max(1e-9),
                );
                Ok(out)
            }
        }
    };
}

cuda_hostcb::for_each_target!(target_table);

const USAGE: &str = "usage: completion-<hash> [--rounds R] [--waits W] [FILTER...]";

fn main() -> ExitCode {
    let (mut rounds, mut waits, mut filters) = (5usize, 2000usize, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} needs a number; {USAGE}"))
        };
        let parsed = match arg.as_str() {
            "--rounds" => number("--rounds").map(|v| rounds = v),
            "--waits" => number("--waits").map(|v| waits = v),
            "--bench" => Ok(()), // what `cargo bench` passes
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other if other.starts_with('-') => Ok(()), // a test harness option: not ours
            other => {
                filters.push(other.to_owned());
                Ok(())
            }
        };
        if let Err(e) = parsed {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let mut names = Vec::new();
    macro_rules! name {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            names.push($target::NAME);
        };
    }
    cuda_hostcb::for_each_target!(name);
    let wanted = |target: &str| {
        filters.is_empty()
            || filters
                .iter()
                .any(|f| "completion".contains(f.as_str()) || target.contains(f.as_str()))
    };
    if !names.iter().any(|t| wanted(t)) {
        println!("completion bench: no target matches the filter {filters:?}; nothing run");
        return ExitCode::SUCCESS;
    }
    let device = match gpu::gate(gpu::probe(0), gpu::require_gpu()) {
        Gate::Run(device) => device,
        Gate::Skip(reason) => {
            println!("SKIP: completion bench: {reason} (REQUIRE_GPU=1 makes this an error)");
            return ExitCode::SUCCESS;
        }
        Gate::Fail(reason) => {
            eprintln!("error: completion bench: REQUIRE_GPU=1 and no usable GPU: {reason}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "completion bench on {} (driver {}.{})",
        device.name,
        device.driver_version / 1000,
        (device.driver_version % 1000) / 10
    );
    let mut status = ExitCode::SUCCESS;
    macro_rules! run {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            if wanted($target::NAME) {
                match $target::table(0, rounds, waits) {
                    Ok(table) => println!("{table}"),
                    Err(e) => {
                        eprintln!("error: completion bench: {}: {e}", $target::NAME);
                        status = ExitCode::FAILURE;
                    }
                }
            }
        };
    }
    cuda_hostcb::for_each_target!(run);
    status
}
