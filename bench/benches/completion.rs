//! Waiting for streams, side by side: `cuStreamSynchronize`, `cuStreamQuery` polled in a spin
//! loop, and three completion futures, for the safe layer:
//!
//! - `Stream::completion` (the safe layer's: an event checked on the awaiting task for up to
//!   `COMPLETION_SPIN`, then by its waiter thread);
//! - a host-callback future (the safe layer's first design, rebuilt here on `Stream::launch`: a
//!   `cuStreamAddCallback` whose closure wakes the task);
//! - a blocking-sync event future (an event made with `CU_EVENT_BLOCKING_SYNC`, recorded after
//!   the work, and a waiter thread of this bench that blocks in `cuEventSynchronize` on each in
//!   turn and wakes the task).
//!
//! The work before each wait: a 4-byte `cuMemsetD32Async`, an empty kernel, or a graph launch (a
//! captured memset and kernel); on 1 stream, and on 64 streams awaited at once (work enqueued on
//! all 64, then all 64 awaited: in turn for the blocking methods, joined for the futures). The
//! methods run in interleaved rounds, so that they share conditions over time. Per method it
//! prints the median and the 99th percentile of the wall time of one enqueue-and-wait (all 64
//! streams for the 64-stream rows), and the CPU time per wait of the whole process (CUDA's own
//! threads and the waiter threads included) and of the waiting thread alone
//! (`CLOCK_PROCESS_CPUTIME_ID` / `CLOCK_THREAD_CPUTIME_ID`); and each future against
//! `cuStreamSynchronize` (p50, p99 and process CPU as ratios), with the targets 1.2, 1.5 and 1.2.
//! Every future is awaited by the same tiny `block_on` (poll; park until woken).
//!
//! usage: completion-<hash> [--rounds R] [--waits W] [FILTER...]   (defaults 3 and 2000; the
//! 64-stream rows make W/10 waits a round). A FILTER that matches neither "completion" nor a
//! target name skips the run (so that a test filter given to every bundled executable does not
//! start it). Without a usable GPU it prints SKIP and exits 0, or exits 1 when `REQUIRE_GPU=1`.

use std::collections::VecDeque;
use std::ffi::CStr;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use hostcb_bench::gpu::{self, Gate};

/// An empty kernel.
const PTX: &CStr = c".version 8.0
.target sm_75
.address_size 64

.visible .entry hostcb_empty()
{
    ret;
}
";

/// Streams awaited at once in the wide rows.
const WIDE: usize = 64;

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

/// Every future of a set, polled until all are ready; the first error, if any.
struct JoinAll<F> {
    futures: Vec<Option<F>>,
    error: Option<String>,
}

impl<F, E> Future for JoinAll<F>
where
    F: Future<Output = Result<(), E>> + Unpin,
    E: std::fmt::Display,
{
    type Output = Result<(), String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut pending = false;
        for slot in &mut this.futures {
            if let Some(f) = slot {
                match Pin::new(f).poll(cx) {
                    Poll::Ready(out) => {
                        if let Err(e) = out {
                            this.error.get_or_insert(e.to_string());
                        }
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            return Poll::Pending;
        }
        Poll::Ready(this.error.take().map_or(Ok(()), Err))
    }
}

fn join_all<F>(futures: Vec<F>) -> JoinAll<F> {
    JoinAll {
        futures: futures.into_iter().map(Some).collect(),
        error: None,
    }
}

/// What a signalling design shares with its future: done, abandoned, and the waker.
#[derive(Default)]
struct Signal {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    fn set(&self, outcome: u8) {
        if self
            .state
            .compare_exchange(0, outcome, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The future of a signalling design (the host callback's, the blocking-sync waiter's).
struct Signalled(Arc<Signal>);

impl Future for Signalled {
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let ready = |s: u8| match s {
            0 => None,
            1 => Some(Ok(())),
            _ => Some(Err("abandoned".to_owned())),
        };
        if let Some(out) = ready(self.0.state.load(Ordering::Acquire)) {
            return Poll::Ready(out);
        }
        {
            let mut slot = self.0.waker.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *slot {
                Some(w) if w.will_wake(cx.waker()) => {}
                other => *other = Some(cx.waker().clone()),
            }
        }
        match ready(self.0.state.load(Ordering::Acquire)) {
            Some(out) => Poll::Ready(out),
            None => Poll::Pending,
        }
    }
}

/// Signals done when called, abandoned when dropped uncalled (the host-callback design).
struct Notify(Arc<Signal>);

impl Drop for Notify {
    fn drop(&mut self) {
        self.0.set(2);
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
}

/// One row's figures, in microseconds.
#[derive(Clone, Copy)]
struct Figures {
    p50: f64,
    p99: f64,
    process_cpu: f64,
    thread_cpu: f64,
}

impl Tally {
    fn figures(&mut self) -> Figures {
        self.waits.sort_unstable();
        let n = self.waits.len().max(1);
        let at = |q: f64| {
            self.waits
                .get(((n - 1) as f64 * q) as usize)
                .map_or(0.0, |&w| w as f64 / 1000.0)
        };
        let per = |ns: u128| ns as f64 / 1000.0 / n as f64;
        Figures {
            p50: at(0.5),
            p99: at(0.99),
            process_cpu: per(self.process_cpu_ns),
            thread_cpu: per(self.thread_cpu_ns),
        }
    }
}

/// Runs `waits` enqueue-and-wait steps of one method into `tally`.
fn batch(
    tally: &mut Tally,
    waits: usize,
    mut step: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let (p0, t0) = (
        cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
        cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
    );
    for _ in 0..waits {
        let start = Instant::now();
        step()?;
        tally.waits.push(start.elapsed().as_nanos() as u64);
    }
    tally.process_cpu_ns += cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - p0;
    tally.thread_cpu_ns += cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t0;
    Ok(())
}

/// The methods, in the order they run and print.
const METHODS: [&str; 5] = [
    "cuStreamSynchronize",
    "cuStreamQuery spin",
    "Stream::completion (event)",
    "host-callback future",
    "blocking-sync event waiter",
];

/// The work kinds.
const WORKS: [&str; 3] = ["memset", "kernel", "graph"];

/// One table: a work kind on 1 or 64 streams, every method.
fn table(target: &str, work: &str, streams: usize, waits: usize, tallies: &mut [Tally]) -> String {
    let figures: Vec<Figures> = tallies.iter_mut().map(Tally::figures).collect();
    let sync = figures[0];
    let mut out = format!(
        "{target} {work} x{streams} stream{}: {waits} waits per method\n{:<28} {:>9} {:>9} {:>12} {:>12} {:>22}\n",
        if streams == 1 { "" } else { "s" },
        "method",
        "p50 us",
        "p99 us",
        "process CPU",
        "waiter CPU",
        "vs sync p50/p99/CPU",
    );
    for (name, f) in METHODS.iter().zip(&figures) {
        let ratios = format!(
            "{:.2}/{:.2}/{:.2}",
            f.p50 / sync.p50.max(1e-9),
            f.p99 / sync.p99.max(1e-9),
            f.process_cpu / sync.process_cpu.max(1e-9)
        );
        out += &format!(
            "{name:<28} {:>9.2} {:>9.2} {:>12.2} {:>12.2} {:>22}\n",
            f.p50, f.p99, f.process_cpu, f.thread_cpu, ratios
        );
    }
    for (name, f) in METHODS.iter().zip(&figures) {
        println!(
            "RESULT target={target} work={work} streams={streams} method=\"{name}\" p50_us={:.2} p99_us={:.2} process_cpu_us={:.2} waiter_cpu_us={:.2}",
            f.p50, f.p99, f.process_cpu, f.thread_cpu
        );
    }
    let ours = figures[2];
    let (a, b, c) = (
        ours.p50 / sync.p50.max(1e-9),
        ours.p99 / sync.p99.max(1e-9),
        ours.process_cpu / sync.process_cpu.max(1e-9),
    );
    let met = a <= 1.2 && b <= 1.5 && c <= 1.2;
    out += &format!(
        "Stream::completion against cuStreamSynchronize: p50 {a:.2} (target 1.2), p99 {b:.2} (1.5), process CPU {c:.2} (1.2): {}\n",
        if met { "met" } else { "NOT met" }
    );
    out
}

/// The tables, in a module named after the target whose bindings the safe layer uses.
macro_rules! target_tables {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        mod $target {
            use super::*;
            use cuda_hostcb_safe::{Context, GraphExec, Stream, sys};

            pub const NAME: &str = stringify!($target);

            /// A bench-local waiter thread that blocks in `cuEventSynchronize` on each event in
            /// turn (the blocking-sync design).
            struct BlockingWaiter {
                queue: Mutex<VecDeque<(usize, Arc<Signal>)>>,
                ready: Condvar,
            }

            /// An event handle that may cross to the waiter thread.
            #[derive(Clone, Copy)]
            struct Event(sys::CUevent);
            // SAFETY: events may be used from any thread.
            unsafe impl Send for Event {}
            unsafe impl Sync for Event {}

            fn start_waiter(ctx: &Context, events: Arc<Vec<Event>>) -> Arc<BlockingWaiter> {
                let waiter = Arc::new(BlockingWaiter {
                    queue: Mutex::new(VecDeque::new()),
                    ready: Condvar::new(),
                });
                let (w, ctx) = (Arc::clone(&waiter), ctx.clone());
                thread::Builder::new()
                    .name("bench-blocking-waiter".to_owned())
                    .spawn(move || {
                        let _ = ctx.make_current();
                        loop {
                            let (i, signal) = {
                                let mut q = w.queue.lock().unwrap_or_else(|e| e.into_inner());
                                loop {
                                    if let Some(item) = q.pop_front() {
                                        break item;
                                    }
                                    q = w.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                                }
                            };
                            // SAFETY: a valid event of the current context.
                            let r = unsafe { sys::cuEventSynchronize(events[i].0) };
                            signal.set(if r.is_ok() { 1 } else { 2 });
                        }
                    })
                    .expect("the blocking waiter thread");
                waiter
            }

            /// The CPU cost of each piece of a wait, one call at a time on an idle stream
            /// (nanoseconds per call, over 20,000 calls, synchronising every 1,000).
            fn pieces(stream: &Stream, dev: sys::CUdeviceptr) -> Result<String, cuda_hostcb_safe::Error> {
                const CALLS: usize = 20_000;
                let raw = stream.as_raw();
                let mut ev: sys::CUevent = std::ptr::null_mut();
                unsafe { sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0)? };
                let mut rows = Vec::new();
                let mut time = |name: &str, f: &mut dyn FnMut() -> Result<(), cuda_hostcb_safe::Error>| -> Result<(), cuda_hostcb_safe::Error> {
                    stream.synchronize()?;
                    let mut ns = 0u128;
                    for chunk in 0..CALLS / 1000 {
                        let t0 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                        for _ in 0..1000 {
                            f()?;
                        }
                        if chunk > 0 {
                            ns += cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t0;
                        }
                        stream.synchronize()?;
                    }
                    rows.push(format!("  {name:<44} {:>8.0} ns", ns as f64 / (CALLS - 1000) as f64));
                    Ok(())
                };
                let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
                time("cuStreamIsCapturing", &mut || unsafe { Ok(sys::cuStreamIsCapturing(raw, &mut status)?) })?;
                time("cuStreamQuery (idle stream)", &mut || unsafe { Ok(sys::cuStreamQuery(raw)?) })?;
                time("cuEventRecord", &mut || unsafe { Ok(sys::cuEventRecord(ev, raw)?) })?;
                stream.synchronize()?;
                time("cuEventQuery (done event)", &mut || unsafe { Ok(sys::cuEventQuery(ev)?) })?;
                time("cuStreamWriteValue32 (device memory)", &mut || unsafe { Ok(sys::cuStreamWriteValue32(raw, dev, 1, 0)?) })?;
                time("cuMemsetD32Async (4 bytes)", &mut || unsafe { Ok(sys::cuMemsetD32Async(dev, 1, 1, raw)?) })?;
                let mut done = Vec::with_capacity(1000);
                let (mut enqueue_ns, mut poll_ns) = (0u128, 0u128);
                stream.synchronize()?;
                for chunk in 0..CALLS / 1000 {
                    let t0 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                    for _ in 0..1000 {
                        done.push(stream.completion()?);
                    }
                    let t1 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                    stream.synchronize()?;
                    let t2 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                    for c in done.drain(..) {
                        block_on(c)?;
                    }
                    let t3 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                    if chunk > 0 {
                        enqueue_ns += t1 - t0;
                        poll_ns += t3 - t2;
                    }
                }
                let per = |ns: u128| ns as f64 / (CALLS - 1000) as f64;
                rows.push(format!("  {:<44} {:>8.0} ns", "Stream::completion (enqueue)", per(enqueue_ns)));
                rows.push(format!("  {:<44} {:>8.0} ns", "its poll once done, and its drop", per(poll_ns)));
                unsafe { sys::cuEventDestroy(ev)? };
                Ok(format!("{NAME}: CPU per call, one at a time on an idle stream (thread CPU time)\n{}\n\n", rows.join("\n")))
            }

            pub fn tables(ordinal: usize, rounds: usize, waits: usize) -> Result<String, String> {
                let e = |e: &dyn std::fmt::Display| e.to_string();
                let ctx = Context::primary(ordinal).map_err(|x| e(&x))?;
                ctx.make_current().map_err(|x| e(&x))?;
                let streams: Vec<Stream> = (0..WIDE)
                    .map(|_| Stream::new(&ctx))
                    .collect::<Result<_, _>>()
                    .map_err(|x| e(&x))?;
                let raws: Vec<sys::CUstream> = streams.iter().map(Stream::as_raw).collect();
                let mut dev: sys::CUdeviceptr = 0;
                unsafe { sys::cuMemAlloc(&mut dev, 4 * WIDE) }.map_err(|x| e(&x))?;
                let (mut module, mut kernel) = (std::ptr::null_mut(), std::ptr::null_mut());
                unsafe {
                    sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast()).map_err(|x| e(&x))?;
                    sys::cuModuleGetFunction(&mut kernel, module, c"hostcb_empty".as_ptr())
                        .map_err(|x| e(&x))?;
                }
                let kernel = kernel;
                let memset = |i: usize, v: u32| {
                    unsafe { sys::cuMemsetD32Async(dev + 4 * i as u64, v, 1, raws[i]) }
                        .map_err(|x| e(&x))
                };
                let launch = |i: usize| {
                    unsafe {
                        sys::cuLaunchKernel(
                            kernel,
                            1,
                            1,
                            1,
                            1,
                            1,
                            1,
                            0,
                            raws[i],
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        )
                    }
                    .map_err(|x| e(&x))
                };
                // One executable per stream: a captured memset and kernel.
                let mut execs: Vec<GraphExec> = Vec::new();
                for (i, stream) in streams.iter().enumerate() {
                    stream
                        .begin_capture(cuda_hostcb_safe::CaptureMode::ThreadLocal)
                        .map_err(|x| e(&x))?;
                    let captured = memset(i, 7).and_then(|()| launch(i));
                    let graph = stream.end_capture().map_err(|x| e(&x))?;
                    captured?;
                    execs.push(graph.instantiate().map_err(|x| e(&x))?);
                }
                // The blocking-sync design's events (one per stream, reused) and waiter.
                let mut events = Vec::new();
                for _ in 0..WIDE {
                    let mut ev: sys::CUevent = std::ptr::null_mut();
                    let flags = sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC.0
                        | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
                    unsafe { sys::cuEventCreate(&mut ev, flags) }.map_err(|x| e(&x))?;
                    events.push(Event(ev));
                }
                let events = Arc::new(events);
                let waiter = start_waiter(&ctx, Arc::clone(&events));
                let not_ready = sys::CUresult::CUDA_ERROR_NOT_READY.0;

                let work = |kind: usize, i: usize| -> Result<(), String> {
                    match kind {
                        0 => memset(i, 1),
                        1 => launch(i),
                        _ => execs[i].launch(&streams[i]).map_err(|x| e(&x)),
                    }
                };
                let mut out = String::new();
                for (kind, work_name) in WORKS.iter().enumerate() {
                    for width in [1, WIDE] {
                        let n = if width == 1 {
                            waits
                        } else {
                            (waits / 10).max(1)
                        };
                        let mut tallies: Vec<Tally> =
                            (0..METHODS.len()).map(|_| Tally::default()).collect();
                        // Round 0 warms up and is not counted.
                        for round in 0..=rounds {
                            let mut warm: Vec<Tally> =
                                (0..METHODS.len()).map(|_| Tally::default()).collect();
                            let t = if round == 0 { &mut warm } else { &mut tallies };
                            batch(&mut t[0], n, || {
                                for i in 0..width {
                                    work(kind, i)?;
                                }
                                for &raw in &raws[..width] {
                                    unsafe { sys::cuStreamSynchronize(raw) }.map_err(|x| e(&x))?;
                                }
                                Ok(())
                            })?;
                            batch(&mut t[1], n, || {
                                for i in 0..width {
                                    work(kind, i)?;
                                }
                                for &raw in &raws[..width] {
                                    loop {
                                        match unsafe { sys::cuStreamQuery(raw) } {
                                            Ok(()) => break,
                                            Err(x) if x.code() == Some(not_ready) => {
                                                std::hint::spin_loop()
                                            }
                                            Err(x) => return Err(e(&x)),
                                        }
                                    }
                                }
                                Ok(())
                            })?;
                            batch(&mut t[2], n, || {
                                let mut futures = Vec::with_capacity(width);
                                for i in 0..width {
                                    work(kind, i)?;
                                    futures.push(streams[i].completion().map_err(|x| e(&x))?);
                                }
                                if width == 1 {
                                    return block_on(futures.pop().expect("one"))
                                        .map_err(|x| e(&x));
                                }
                                // Joined as they are (a `Completion` is `Unpin`), as the other
                                // designs' futures are: no box or adapter per future.
                                block_on(join_all(futures))
                            })?;
                            batch(&mut t[3], n, || {
                                let mut futures = Vec::with_capacity(width);
                                for i in 0..width {
                                    work(kind, i)?;
                                    let signal = Arc::new(Signal::default());
                                    let notify = Notify(Arc::clone(&signal));
                                    streams[i]
                                        .launch(move || notify.0.set(1))
                                        .map_err(|x| e(&x))?;
                                    futures.push(Signalled(signal));
                                }
                                block_on(join_all(futures))
                            })?;
                            batch(&mut t[4], n, || {
                                let mut futures = Vec::with_capacity(width);
                                for i in 0..width {
                                    work(kind, i)?;
                                    unsafe { sys::cuEventRecord(events[i].0, raws[i]) }
                                        .map_err(|x| e(&x))?;
                                    let signal = Arc::new(Signal::default());
                                    waiter
                                        .queue
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .push_back((i, Arc::clone(&signal)));
                                    waiter.ready.notify_one();
                                    futures.push(Signalled(signal));
                                }
                                block_on(join_all(futures))
                            })?;
                        }
                        out += &table(NAME, work_name, width, n * rounds, &mut tallies);
                        out.push('\n');
                    }
                }
                out += &pieces(&streams[0], dev).map_err(|x| e(&x))?;
                for s in &streams {
                    s.synchronize().map_err(|x| e(&x))?;
                }
                drop(execs);
                unsafe {
                    let _ = sys::cuMemFree(dev);
                    let _ = sys::cuModuleUnload(module);
                }
                Ok(out)
            }
        }
    };
}

cuda_hostcb::newest_target!(target_tables);

const USAGE: &str = "usage: completion-<hash> [--rounds R] [--waits W] [FILTER...]";

fn main() -> ExitCode {
    let (mut rounds, mut waits, mut filters) = (3usize, 2000usize, Vec::new());
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
    cuda_hostcb::newest_target!(name);
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
        "completion bench on {} (driver {}.{}); {rounds} rounds, interleaved",
        device.name,
        device.driver_version / 1000,
        (device.driver_version % 1000) / 10
    );
    let mut status = ExitCode::SUCCESS;
    macro_rules! run {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            if wanted($target::NAME) {
                match $target::tables(0, rounds, waits) {
                    Ok(tables) => println!("{tables}"),
                    Err(e) => {
                        eprintln!("error: completion bench: {}: {e}", $target::NAME);
                        status = ExitCode::FAILURE;
                    }
                }
            }
        };
    }
    cuda_hostcb::newest_target!(run);
    status
}
