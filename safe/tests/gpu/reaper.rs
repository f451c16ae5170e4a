//! GPU tests of drops off CUDA's threads: 1,000 closures per path (`Stream::launch`, host nodes
//! of a graph, closures captured by `Stream::launch_fn`), each owning 2 MiB of device memory
//! that its `Drop` frees with `cuMemFree`. CUDA refuses CUDA calls on its own threads
//! (`CUDA_ERROR_NOT_PERMITTED`), so every free must run on a program thread (the safe layer's
//! reaper): every free returns success, the device's free memory comes back (`cuMemGetInfo`),
//! every count is exact, and nothing deadlocks (a watchdog ends the process after 120 s). Each
//! case allocates what its closures own, records in callbacks and drops, and checks on the test
//! thread once every closure is dropped.
//!
//! The `graph_keeps_*` trials ([`kept`]) move a buffer that a kernel reads into the graph
//! (`Graph::keep`, `Stream::keep_in_capture`): freed once, on the reaper, after the executable.
//!
//! The `teardown_*` trials ([`teardown`]) drop a handle inside a callback right before the
//! program's last context handle, for hundreds of rounds in a child process: the handle's
//! destruction must come before the context's release.

pub mod kept;
pub mod teardown;

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cuda_hostcb_safe::{CaptureMode, REAPER_THREAD_NAME, overflowed_drops, wait_for_drops};
use hostcb_gate::trials::{Case, Failed, Outcome, Watchdog, done, wait_until};
use hostcb_gate::{expect_eq, expect_that};

use self::teardown::Victim;
use cuda_hostcb_safe::{self as safe, sys};

/// Closures per path.
const N: usize = 1000;
/// Device memory each closure owns.
const BYTES: usize = 2 << 20;
/// Free device memory that may go missing for other reasons (the driver's own allocations for a
/// graph): a few buffers' worth, against the 1,000 a leak would lose.
const SLACK: usize = 8 * BYTES;
/// How long a path may take before the watchdog ends the process.
const LIMIT: Duration = Duration::from_secs(120);

/// Every case: the three paths, the teardowns ([`teardown`]) and the kept buffers ([`kept`]).
pub fn cases() -> Vec<(&'static str, Case)> {
    vec![
        ("stream_launch_1000_closures_free_device_memory", |_| {
            stream_launch()
        }),
        ("host_nodes_1000_closures_free_device_memory", |_| {
            host_nodes()
        }),
        ("captured_1000_closures_free_device_memory", |_| captured()),
        (
            "teardown_stream_dropped_in_a_callback_before_the_last_context",
            |_| teardown::trial(Victim::Stream),
        ),
        (
            "teardown_graph_dropped_in_a_callback_before_the_last_context",
            |_| teardown::trial(Victim::Graph),
        ),
        (
            "teardown_exec_dropped_in_a_callback_before_the_last_context",
            |_| teardown::trial(Victim::GraphExec),
        ),
        (
            "teardown_completion_dropped_in_a_callback_before_the_last_context",
            |_| teardown::trial(Victim::Completion),
        ),
        ("graph_keeps_the_buffer_its_kernel_node_reads", |_| {
            kept::trial(kept::Way::Node)
        }),
        ("graph_keeps_the_buffer_its_captured_kernel_reads", |_| {
            kept::trial(kept::Way::Capture)
        }),
    ]
}

/// What the closures and their buffers recorded.
#[derive(Default)]
pub(crate) struct Log {
    pub(crate) calls: AtomicUsize,
    pub(crate) drops: AtomicUsize,
    pub(crate) frees_ok: AtomicUsize,
    /// The codes of failed frees.
    pub(crate) frees_failed: Mutex<Vec<u32>>,
    /// Drops on the reaper thread, on another named (program) thread, on an unnamed one
    /// (CUDA's threads are not named by Rust).
    pub(crate) on_reaper: AtomicUsize,
    pub(crate) on_program: AtomicUsize,
    pub(crate) on_unnamed: AtomicUsize,
}

/// 2 MiB of device memory, freed in `Drop` with its context made current there.
pub(crate) struct Buffer {
    pub(crate) ptr: sys::CUdeviceptr,
    ctx: sys::CUcontext,
    log: Arc<Log>,
}

// SAFETY: a device pointer and a context may be used from any thread.
unsafe impl Send for Buffer {}
// SAFETY: as above; the closures only read the buffer's address.
unsafe impl Sync for Buffer {}

impl Buffer {
    pub(crate) fn new(ctx: &safe::Context, log: &Arc<Log>) -> Result<Buffer, Failed> {
        let mut ptr: sys::CUdeviceptr = 0;
        unsafe { sys::cuMemAlloc(&mut ptr, BYTES) }?;
        Ok(Buffer {
            ptr,
            ctx: ctx.as_raw(),
            log: Arc::clone(log),
        })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let log = &self.log;
        match std::thread::current().name() {
            Some(REAPER_THREAD_NAME) => log.on_reaper.fetch_add(1, SeqCst),
            Some(_) => log.on_program.fetch_add(1, SeqCst),
            None => log.on_unnamed.fetch_add(1, SeqCst),
        };
        // As a careful owner does (cudarc's buffers too): its context current for the free.
        let mut popped: sys::CUcontext = ptr::null_mut();
        let freed = unsafe {
            sys::cuCtxPushCurrent(self.ctx).and_then(|()| {
                let freed = sys::cuMemFree(self.ptr);
                sys::cuCtxPopCurrent(&mut popped)?;
                freed
            })
        };
        match freed {
            Ok(()) => {
                log.frees_ok.fetch_add(1, SeqCst);
            }
            Err(e) => log
                .frees_failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e.code().unwrap_or(u32::MAX)),
        }
        log.drops.fetch_add(1, SeqCst);
    }
}

/// A closure owning a buffer: counts its call.
fn owning(buffer: Buffer) -> impl Fn() + Send + Sync + 'static {
    move || {
        buffer.log.calls.fetch_add(1, SeqCst);
    }
}

pub(crate) fn current() -> Result<safe::Context, Failed> {
    let ctx = safe::Context::primary(0)?;
    ctx.make_current()?;
    Ok(ctx)
}

fn free_memory() -> Result<usize, Failed> {
    let (mut free, mut total) = (0usize, 0usize);
    unsafe { sys::cuMemGetInfo(&mut free, &mut total) }?;
    Ok(free)
}

/// The checks every path makes once its closures are gone.
fn check(path: &str, log: &Log, before: usize, during: usize, after: usize) -> Outcome {
    let failed = log
        .frees_failed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let names = |codes: &[u32]| -> Vec<String> {
        codes
            .iter()
            .take(3)
            .map(|&code| {
                cuda_hostcb::Error::Cuda {
                    api: cuda_hostcb::error::Api::Driver,
                    function: "cuMemFree",
                    code,
                }
                .to_string()
            })
            .collect()
    };
    expect_eq(&format!("{path}: calls"), N, log.calls.load(SeqCst))?;
    expect_eq(&format!("{path}: drops"), N, log.drops.load(SeqCst))?;
    expect_eq(
        &format!("{path}: failed frees (first: {:?})", names(&failed)),
        0,
        failed.len(),
    )?;
    expect_eq(
        &format!("{path}: successful frees"),
        N,
        log.frees_ok.load(SeqCst),
    )?;
    expect_eq(
        &format!("{path}: drops on the reaper thread"),
        N,
        log.on_reaper.load(SeqCst),
    )?;
    expect_eq(
        &format!("{path}: drops on an unnamed (CUDA) thread"),
        0,
        log.on_unnamed.load(SeqCst),
    )?;
    let used = before.saturating_sub(during);
    expect_that(
        &format!("{path}: the buffers were allocated ({N} x {BYTES} B) while the closures lived"),
        used >= N * BYTES,
        format!("{used} B in use then"),
    )?;
    // What the drops gave back: free memory once they ran, against free memory while the
    // buffers lived. (Not against free memory before: launching a graph of 1,000 independent
    // host nodes makes CUDA keep about 110 MiB of its own in the context until the context
    // goes, measured on an H200 for every target, whoever owns the host functions.)
    let returned = after.saturating_sub(during);
    expect_that(
        &format!(
            "{path}: every buffer's memory came back ({N} x {BYTES} B, less than {SLACK} B missing)"
        ),
        returned + SLACK > N * BYTES,
        format!(
            "free memory {during} B with the buffers, {after} B after their drops: {returned} B \
             came back ({} B before the buffers)",
            before
        ),
    )?;
    println!(
        "{path}: {N} closures, {} calls, {} drops ({} on {REAPER_THREAD_NAME}, {} on \
         other program threads, {} on CUDA's), {} frees succeeded, {} failed; free memory {} MiB \
         before, {} MiB with the buffers, {} MiB after; {} drops overflowed in the process",
        log.calls.load(SeqCst),
        log.drops.load(SeqCst),
        log.on_reaper.load(SeqCst),
        log.on_program.load(SeqCst),
        log.on_unnamed.load(SeqCst),
        log.frees_ok.load(SeqCst),
        failed.len(),
        before >> 20,
        during >> 20,
        after >> 20,
        overflowed_drops()
    );
    done()
}

/// Waits (under the watchdog) until all `N` buffers are dropped, then for the reaper.
fn all_dropped(log: &Log) -> Result<(), Failed> {
    wait_until(Duration::from_secs(60), || log.drops.load(SeqCst) >= N);
    wait_for_drops()?;
    Ok(())
}

fn stream_launch() -> Outcome {
    let _watchdog = Watchdog::arm("stream_launch".to_owned(), LIMIT);
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    ctx.synchronize()?;
    wait_for_drops()?;
    let before = free_memory()?;
    let log = Arc::new(Log::default());
    // A gate holds the stream until every closure is enqueued, so that all buffers coexist.
    let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let g = Arc::clone(&gate);
    stream.launch(move || {
        wait_until(Duration::from_secs(60), || g.load(SeqCst));
    })?;
    for _ in 0..N {
        stream.launch(owning(Buffer::new(&ctx, &log)?))?;
    }
    let during = free_memory()?;
    gate.store(true, SeqCst);
    stream.synchronize()?;
    all_dropped(&log)?;
    let after = free_memory()?;
    check("stream_launch", &log, before, during, after)
}

fn host_nodes() -> Outcome {
    let _watchdog = Watchdog::arm("host_nodes".to_owned(), LIMIT);
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    ctx.synchronize()?;
    wait_for_drops()?;
    let before = free_memory()?;
    let log = Arc::new(Log::default());
    let graph = safe::Graph::new(&ctx)?;
    for _ in 0..N {
        graph.add_host_node(&[], owning(Buffer::new(&ctx, &log)?))?;
    }
    let exec = graph.instantiate()?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    let during = free_memory()?;
    // CUDA runs the user objects' destructors (on its own thread) after the last holder goes.
    drop(exec);
    drop(graph);
    all_dropped(&log)?;
    let after = free_memory()?;
    check("host_nodes", &log, before, during, after)
}

fn captured() -> Outcome {
    let _watchdog = Watchdog::arm("captured".to_owned(), LIMIT);
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    ctx.synchronize()?;
    wait_for_drops()?;
    let before = free_memory()?;
    let log = Arc::new(Log::default());
    let mut buffers = Vec::with_capacity(N);
    for _ in 0..N {
        // Allocated before the capture: cuMemAlloc is not permitted while capturing globally.
        buffers.push(Buffer::new(&ctx, &log)?);
    }
    stream.begin_capture(CaptureMode::Global)?;
    let mut launched = Ok(());
    for buffer in buffers {
        launched = launched.and(stream.launch_fn(owning(buffer)));
    }
    let graph = stream.end_capture()?;
    launched?;
    expect_eq("captured: nodes", N, graph.node_count()?)?;
    let exec = graph.instantiate()?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    let during = free_memory()?;
    drop(exec);
    drop(graph);
    all_dropped(&log)?;
    let after = free_memory()?;
    check("captured", &log, before, during, after)
}
