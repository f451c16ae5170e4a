//! The measured paths: one `extern "C" fn hostcb_one_<path>()` each, making exactly one call of
//! that path, and what the stub must have counted after `n` of them.
//!
//! The C paths live in `stub/cref.c`; the Rust ones here. Every raw path passes the same C host
//! function (`cref_cb`, which counts its calls), so that the paths differ only in how they reach
//! CUDA. The safe paths pass closures that capture a reference to a counter (so they are boxed,
//! like a user's closure with state) and count with a plain load and store, as `cref_cb` does.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::future::Future;
use std::ptr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicPtr, AtomicU64};

use cuda_hostcb_safe::{CaptureMode, Context, Graph, GraphExec, Stream};

// The bindings measured: the newest target of each CUDA major version (no hand-written file names
// a target). The stub driver acts as a 13.0 driver; every function these paths call is older.
macro_rules! thirteen {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        use cuda_hostcb::$target::driver as cu;
        use cuda_hostcb::$target::runtime as rt13;
    };
}
cuda_hostcb::newest_target_of_major!(13, thirteen);
macro_rules! twelve {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        use cuda_hostcb::$target::runtime as rt12;
    };
}
cuda_hostcb::newest_target_of_major!(12, twelve);

use crate::stub::{self, Count, RtCount};

unsafe extern "C" {
    fn cref_open() -> i32;
    fn cref_set_handles(
        stream: *mut c_void,
        capture_stream: *mut c_void,
        query_stream: *mut c_void,
        exec: *mut c_void,
    );
    fn cref_cb(data: *mut c_void);
    fn cref_calls() -> u64;
    fn cref_boxed_calls() -> u64;
    fn hostcb_one_c_first() -> i32;
    fn hostcb_one_c_launch() -> i32;
    fn hostcb_one_c_rt12_launch() -> i32;
    fn hostcb_one_c_rt13_launch() -> i32;
    fn hostcb_one_c_launch_checked() -> i32;
    fn hostcb_one_c_rt13_launch_checked() -> i32;
    fn hostcb_one_c_boxed_launch() -> i32;
    fn hostcb_one_c_graph_launch() -> i32;
    fn hostcb_one_c_captured() -> i32;
    fn hostcb_one_c_query() -> i32;
}

/// `CUDA_ERROR_NOT_READY` and `cudaErrorNotReady`: what a query of a busy stream returns.
pub const NOT_READY: i32 = 600;

/// What a path is, for its setup and for the counts checked after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call that does nothing: the cost of the measuring loop's call itself.
    Empty,
    /// `cuLaunchHostFunc` of `cref_cb` on an idle stream.
    Launch,
    /// `cudaLaunchHostFunc` of `cref_cb` in the runtime of this major version.
    RtLaunch(u32),
    /// `cuStreamQuery` of an idle stream (`false`) or of a busy one (`true`, it fails).
    Query(bool),
    /// C's boxed launch: capture check, `malloc`, launch, `free` in the host function.
    CBoxed,
    /// The safe `Stream::launch` of a closure.
    SafeLaunch,
    /// `cuGraphLaunch` of the one-host-node executable (C) or `GraphExec::launch` (safe).
    Graph,
    /// `cuLaunchHostFunc` of `cref_cb` into a capturing stream (C).
    CCaptured,
    /// The safe `Stream::launch_fn` of a closure into a capturing stream.
    SafeCaptured,
    /// `cuStreamSynchronize` of an idle stream (raw).
    Sync,
    /// The safe `Stream::completion` on an idle stream, polled once (done) and dropped.
    Completion,
    /// The first call in a fresh process (library search, dlopen, resolution, the call).
    First,
}

/// One measured path.
#[derive(Debug, Clone, Copy)]
pub struct Path {
    /// Its name in tables and in budgets.txt.
    pub name: &'static str,
    /// What it is, for the table.
    pub what: &'static str,
    /// One call of it; returns the CUDA code (0, or [`NOT_READY`] for a failing query).
    pub one: unsafe extern "C" fn() -> i32,
    /// The code every call must return.
    pub expect: i32,
    pub kind: Kind,
}

const fn path(
    name: &'static str,
    what: &'static str,
    one: unsafe extern "C" fn() -> i32,
    kind: Kind,
) -> Path {
    let expect = match kind {
        Kind::Query(true) => NOT_READY,
        _ => 0,
    };
    Path {
        name,
        what,
        one,
        expect,
        kind,
    }
}

/// Every path measured in one process, in table order.
pub const PATHS: &[Path] = &[
    path(
        "empty",
        "an empty extern \"C\" fn (the loop's own call)",
        hostcb_one_empty,
        Kind::Empty,
    ),
    path(
        "c_launch",
        "C: cuLaunchHostFunc through the cuGetProcAddress pointer",
        hostcb_one_c_launch,
        Kind::Launch,
    ),
    path(
        "rust_ptr_launch",
        "Rust: the same pointer, code checked",
        hostcb_one_rust_ptr_launch,
        Kind::Launch,
    ),
    path(
        "cudarc_launch",
        "cudarc 0.19 sys::cuLaunchHostFunc(..).result()",
        hostcb_one_cudarc_launch,
        Kind::Launch,
    ),
    path(
        "ours_driver_launch",
        "ours: driver::cuLaunchHostFunc(..) (newest 13.x target)",
        hostcb_one_ours_driver_launch,
        Kind::Launch,
    ),
    path(
        "c_launch_checked",
        "C: the same call, status checked (0 on success, 1 on failure)",
        hostcb_one_c_launch_checked,
        Kind::Launch,
    ),
    path(
        "rust_ptr_launch_checked",
        "Rust: the same pointer, `?` on the code in a fn returning Result",
        hostcb_one_rust_ptr_launch_checked,
        Kind::Launch,
    ),
    path(
        "cudarc_launch_checked",
        "cudarc: sys::cuLaunchHostFunc(..).result()?",
        hostcb_one_cudarc_launch_checked,
        Kind::Launch,
    ),
    path(
        "ours_driver_launch_checked",
        "ours: driver::cuLaunchHostFunc(..)?",
        hostcb_one_ours_driver_launch_checked,
        Kind::Launch,
    ),
    path(
        "c_rt13_launch",
        "C: cudaLaunchHostFunc (13) through the dlsym pointer",
        hostcb_one_c_rt13_launch,
        Kind::RtLaunch(13),
    ),
    path(
        "rust_ptr_rt13_launch",
        "Rust: the same pointer, code checked",
        hostcb_one_rust_ptr_rt13_launch,
        Kind::RtLaunch(13),
    ),
    path(
        "cudarc_rt13_launch",
        "cudarc 0.19 runtime sys::cudaLaunchHostFunc(..).result()",
        hostcb_one_cudarc_rt13_launch,
        Kind::RtLaunch(13),
    ),
    path(
        "ours_rt13_launch",
        "ours: runtime::cudaLaunchHostFunc(..) (newest 13.x target)",
        hostcb_one_ours_rt13_launch,
        Kind::RtLaunch(13),
    ),
    path(
        "c_rt13_launch_checked",
        "C: the same call, status checked (0 on success, 1 on failure)",
        hostcb_one_c_rt13_launch_checked,
        Kind::RtLaunch(13),
    ),
    path(
        "rust_ptr_rt13_launch_checked",
        "Rust: the same pointer, `?` on the code in a fn returning Result",
        hostcb_one_rust_ptr_rt13_launch_checked,
        Kind::RtLaunch(13),
    ),
    path(
        "cudarc_rt13_launch_checked",
        "cudarc: runtime sys::cudaLaunchHostFunc(..).result()?",
        hostcb_one_cudarc_rt13_launch_checked,
        Kind::RtLaunch(13),
    ),
    path(
        "ours_rt13_launch_checked",
        "ours: runtime::cudaLaunchHostFunc(..)?",
        hostcb_one_ours_rt13_launch_checked,
        Kind::RtLaunch(13),
    ),
    path(
        "c_rt12_launch",
        "C: cudaLaunchHostFunc (12) through the dlsym pointer",
        hostcb_one_c_rt12_launch,
        Kind::RtLaunch(12),
    ),
    path(
        "ours_rt12_launch",
        "ours: runtime::cudaLaunchHostFunc(..) (newest 12.x target)",
        hostcb_one_ours_rt12_launch,
        Kind::RtLaunch(12),
    ),
    path(
        "c_query_ok",
        "C: cuStreamQuery, idle stream (success)",
        hostcb_one_c_query,
        Kind::Query(false),
    ),
    path(
        "cudarc_query_ok",
        "cudarc: cuStreamQuery(..).result(), success",
        hostcb_one_cudarc_query,
        Kind::Query(false),
    ),
    path(
        "ours_query_ok",
        "ours: cuStreamQuery(..), success",
        hostcb_one_ours_query,
        Kind::Query(false),
    ),
    path(
        "c_query_fail",
        "C: cuStreamQuery, busy stream (CUDA_ERROR_NOT_READY)",
        hostcb_one_c_query,
        Kind::Query(true),
    ),
    path(
        "cudarc_query_fail",
        "cudarc: cuStreamQuery(..).result(), NOT_READY",
        hostcb_one_cudarc_query,
        Kind::Query(true),
    ),
    path(
        "ours_query_fail",
        "ours: cuStreamQuery(..), NOT_READY (Error made, dropped)",
        hostcb_one_ours_query,
        Kind::Query(true),
    ),
    path(
        "c_boxed_launch",
        "C: capture check, malloc, cuLaunchHostFunc, free in the callback",
        hostcb_one_c_boxed_launch,
        Kind::CBoxed,
    ),
    path(
        "safe_stream_launch",
        "safe: Stream::launch(closure)",
        hostcb_one_safe_stream_launch,
        Kind::SafeLaunch,
    ),
    path(
        "ours_sync",
        "ours: cuStreamSynchronize(..) of an idle stream",
        hostcb_one_ours_sync,
        Kind::Sync,
    ),
    path(
        "safe_completion",
        "safe: Stream::completion() on an idle stream, polled once (done), dropped",
        hostcb_one_safe_completion,
        Kind::Completion,
    ),
    path(
        "c_graph_launch",
        "C: cuGraphLaunch (one host node)",
        hostcb_one_c_graph_launch,
        Kind::Graph,
    ),
    path(
        "safe_graph_launch",
        "safe: GraphExec::launch (the same executable)",
        hostcb_one_safe_graph_launch,
        Kind::Graph,
    ),
    path(
        "c_captured",
        "C: cuLaunchHostFunc into a capturing stream",
        hostcb_one_c_captured,
        Kind::CCaptured,
    ),
    path(
        "safe_captured",
        "safe: Stream::launch_fn(closure) into a capturing stream",
        hostcb_one_safe_captured,
        Kind::SafeCaptured,
    ),
];

/// The first-call paths, each measured in a fresh process of its own.
pub const FIRST: &[Path] = &[
    path(
        "c_first",
        "C: dlopen, cuGetProcAddress, first cuLaunchHostFunc",
        hostcb_one_c_first,
        Kind::First,
    ),
    path(
        "cudarc_first",
        "cudarc: first sys::cuLaunchHostFunc (search, dlopen, dlsym)",
        hostcb_one_cudarc_first,
        Kind::First,
    ),
    path(
        "ours_first",
        "ours: first cuLaunchHostFunc (search, dlopen, cuGetProcAddress)",
        hostcb_one_ours_first,
        Kind::First,
    ),
];

/// Looks a path up by name, in both lists.
pub fn find(name: &str) -> Option<&'static Path> {
    PATHS.iter().chain(FIRST).find(|p| p.name == name)
}

// ---- state ----------------------------------------------------------------------------------

/// A value the `one` functions read without a lock: set once by [`setup`] before any of them
/// runs, on the one thread that measures (the bench never measures from two threads).
struct Once<T>(UnsafeCell<Option<T>>);

// SAFETY: written once before any reader runs, then only read, on one thread.
unsafe impl<T> Sync for Once<T> {}

impl<T> Once<T> {
    const fn new() -> Self {
        Once(UnsafeCell::new(None))
    }
    fn set(&self, value: T) {
        // SAFETY: see the type: nothing reads it while setup writes it.
        unsafe { *self.0.get() = Some(value) }
    }
    /// The value; a plain read, like a C program's global (no check on the measured paths).
    #[inline(always)]
    fn get(&self) -> &T {
        // SAFETY: see the type: setup() set it before any path runs.
        unsafe { (*self.0.get()).as_ref().unwrap_unchecked() }
    }
}

/// The handles every path uses.
struct Handles {
    _ctx: Context,
    /// The idle stream of the launch paths.
    stream: Stream,
    /// The stream the captured paths capture on.
    capture: Stream,
    /// The stream the query paths query (marked busy for the failing ones).
    query: Stream,
    /// A one-host-node executable whose closure counts on [`GRAPH_CALLS`].
    exec: GraphExec,
}

static HANDLES: Once<Handles> = Once::new();
/// The raw handles the raw paths pass: plain loads, like a C program's globals.
static STREAM: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static QUERY_STREAM: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static RAW_LAUNCH: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static RAW_RT13_LAUNCH: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

/// Counted by the closures of `safe_stream_launch`.
static SAFE_CALLS: AtomicU64 = AtomicU64::new(0);
/// Counted by the closure of the executable's host node.
static GRAPH_CALLS: AtomicU64 = AtomicU64::new(0);
/// Counted by the closures captured by `safe_captured`, when the graph is launched.
static CAPTURED_CALLS: AtomicU64 = AtomicU64::new(0);
/// Counted when a closure captured by `safe_captured` is dropped.
static CAPTURED_DROPS: AtomicU64 = AtomicU64::new(0);

/// Counts its drops on [`CAPTURED_DROPS`]: what a captured closure holds.
struct DropCount;

impl Drop for DropCount {
    fn drop(&mut self) {
        bump(&CAPTURED_DROPS);
    }
}

fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

type LaunchFn = unsafe extern "C" fn(
    *mut c_void,
    Option<unsafe extern "C" fn(*mut c_void)>,
    *mut c_void,
) -> i32;

/// Opens everything the paths in this process use: the C side's pointers, the Rust raw
/// pointers, a context, streams and the executable.
pub fn setup() -> Result<(), String> {
    stub::check_loaded()?;
    // SAFETY: plain C setup, once.
    let rc = unsafe { cref_open() };
    if rc != 0 {
        return Err(format!("the C side could not open the stubs (code {rc})"));
    }
    RAW_LAUNCH.store(stub::driver_proc("cuLaunchHostFunc", 10000)?, Relaxed);
    RAW_RT13_LAUNCH.store(stub::runtime_symbol(13, c"cudaLaunchHostFunc")?, Relaxed);

    let safe = |e: cuda_hostcb_safe::Error| format!("safe layer: {e}");
    let ctx = Context::primary(0).map_err(safe)?;
    ctx.make_current().map_err(safe)?;
    let stream = Stream::new(&ctx).map_err(safe)?;
    let capture = Stream::new(&ctx).map_err(safe)?;
    let query = Stream::new(&ctx).map_err(safe)?;
    let graph = Graph::new(&ctx).map_err(safe)?;
    graph
        .add_host_node(&[], || bump(&GRAPH_CALLS))
        .map_err(safe)?;
    let exec = graph.instantiate().map_err(safe)?;
    // SAFETY: the handles live in HANDLES for the rest of the process.
    unsafe {
        cref_set_handles(
            stream.as_raw().cast(),
            capture.as_raw().cast(),
            query.as_raw().cast(),
            exec.as_raw().cast(),
        )
    };
    STREAM.store(stream.as_raw().cast(), Relaxed);
    QUERY_STREAM.store(query.as_raw().cast(), Relaxed);
    HANDLES.set(Handles {
        _ctx: ctx,
        stream,
        capture,
        query,
        exec,
    });
    Ok(())
}

/// The counters one run of a path is checked with.
#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    driver: [u64; Count::LEN],
    rt12: [u64; RtCount::LEN],
    rt13: [u64; RtCount::LEN],
    cref: u64,
    boxed: u64,
    safe: u64,
    graph: u64,
    captured: u64,
}

fn snapshot() -> Snapshot {
    Snapshot {
        driver: stub::driver_counts(),
        rt12: stub::runtime_counts(12),
        rt13: stub::runtime_counts(13),
        // SAFETY: plain reads of the C side's counters.
        cref: unsafe { cref_calls() },
        boxed: unsafe { cref_boxed_calls() },
        safe: SAFE_CALLS.load(Relaxed),
        graph: GRAPH_CALLS.load(Relaxed),
        captured: CAPTURED_CALLS.load(Relaxed),
    }
}

/// What a run of `n` calls of a path has to show, checked after it: the state before it.
pub struct Run {
    path: &'static Path,
    n: u64,
    before: Snapshot,
}

/// Prepares a run of `n` calls of `path` (marks the query stream, begins a capture).
pub fn begin(path: &'static Path, n: u64) -> Result<Run, String> {
    let h = HANDLES.get();
    match path.kind {
        Kind::Query(busy) => {
            stub::set_pending(h.query.as_raw().cast(), busy)?;
        }
        Kind::CCaptured | Kind::SafeCaptured => h
            .capture
            .begin_capture(CaptureMode::Global)
            .map_err(|e| format!("{}: begin_capture: {e}", path.name))?,
        _ => {}
    }
    Ok(Run {
        path,
        n,
        before: snapshot(),
    })
}

/// Checks that the stub (and the host functions) counted exactly the work of the run; ends a
/// capture, then launches the captured graph once and checks that every captured call runs, and
/// that destroying it runs every closure's destructor.
pub fn end(run: Run) -> Result<(), String> {
    let Run { path, n, before } = run;
    let after = snapshot();
    let mut wrong = Vec::new();
    let mut expect = |what: &str, got: u64, want: u64| {
        if got != want {
            wrong.push(format!("{what}: {got} where {want} were due"));
        }
    };
    let d = |c: Count| after.driver[c as usize] - before.driver[c as usize];
    let r = |major: u32, c: RtCount| {
        let (a, b) = if major == 12 {
            (after.rt12, before.rt12)
        } else {
            (after.rt13, before.rt13)
        };
        a[c as usize] - b[c as usize]
    };
    match path.kind {
        Kind::Empty | Kind::First => {}
        Kind::Launch => {
            expect("stub cuLaunchHostFunc calls", d(Count::LaunchHostFunc), n);
            expect("stub host-function calls", d(Count::HostCalls), n);
            expect("cref_cb calls", after.cref - before.cref, n);
        }
        Kind::RtLaunch(major) => {
            expect(
                "stub cudaLaunchHostFunc calls",
                r(major, RtCount::LaunchHostFunc),
                n,
            );
            expect("stub host-function calls", r(major, RtCount::HostCalls), n);
            expect("cref_cb calls", after.cref - before.cref, n);
        }
        Kind::Query(busy) => {
            expect("stub cuStreamQuery calls", d(Count::StreamQueries), n);
            expect(
                "stub failed calls",
                d(Count::Failed),
                if busy { n } else { 0 },
            );
        }
        Kind::CBoxed | Kind::SafeLaunch => {
            expect("stub cuStreamIsCapturing calls", d(Count::IsCapturing), n);
            // C launches a host function; the safe layer a stream callback, which CUDA also
            // makes (with the error) after a context error.
            let (launches, callbacks) = if path.kind == Kind::CBoxed {
                (n, 0)
            } else {
                (0, n)
            };
            expect(
                "stub cuLaunchHostFunc calls",
                d(Count::LaunchHostFunc),
                launches,
            );
            expect(
                "stub cuStreamAddCallback calls",
                d(Count::AddCallback),
                callbacks,
            );
            expect("stub host-function calls", d(Count::HostCalls), n);
            let calls = if path.kind == Kind::CBoxed {
                after.boxed - before.boxed
            } else {
                after.safe - before.safe
            };
            expect("closure calls", calls, n);
        }
        Kind::Sync => {
            expect("stub cuStreamSynchronize calls", d(Count::StreamSyncs), n);
        }
        Kind::Completion => {
            expect("stub cuStreamIsCapturing calls", d(Count::IsCapturing), n);
            expect("stub cuEventRecord calls", d(Count::EventRecords), n);
            expect("stub cuEventQuery calls", d(Count::EventQueries), n);
        }
        Kind::Graph => {
            expect("stub cuGraphLaunch calls", d(Count::GraphLaunches), n);
            expect("stub host-function calls", d(Count::HostCalls), n);
            expect("host-node closure calls", after.graph - before.graph, n);
        }
        Kind::CCaptured | Kind::SafeCaptured => {
            expect("stub captured host functions", d(Count::CapturedNodes), n);
            expect(
                "stub host-function calls while capturing",
                d(Count::HostCalls),
                0,
            );
            if path.kind == Kind::SafeCaptured {
                expect(
                    "stub cuStreamGetCaptureInfo calls",
                    d(Count::CaptureInfo),
                    n,
                );
            }
            captured_graph(path, n, d(Count::UserObjects), &mut expect)?;
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: the stub's counts are wrong after {n} calls, so the figures are discarded: {}",
            path.name,
            wrong.join("; ")
        ))
    }
}

/// Records that no user object owns the captured closures.
fn wrong_owner(expect: &mut impl FnMut(&str, u64, u64)) {
    expect("user objects made for the captured closures", 0, 1);
}

/// Ends the capture of a captured path, launches the graph once (every captured host function
/// must run once) and destroys it (every closure of `safe_captured` must be dropped, and every
/// user object the run made, `made`, destroyed).
fn captured_graph(
    path: &Path,
    n: u64,
    made: u64,
    expect: &mut impl FnMut(&str, u64, u64),
) -> Result<(), String> {
    let h = HANDLES.get();
    let err = |what: &str, e: cuda_hostcb_safe::Error| format!("{}: {what}: {e}", path.name);
    let graph = h.capture.end_capture().map_err(|e| err("end_capture", e))?;
    let nodes = graph.node_count().map_err(|e| err("node_count", e))?;
    expect("nodes in the captured graph", nodes as u64, n);
    let exec = graph.instantiate().map_err(|e| err("instantiate", e))?;
    let before = snapshot();
    exec.launch(&h.stream).map_err(|e| err("launch", e))?;
    let after = snapshot();
    let ran = if path.kind == Kind::SafeCaptured {
        after.captured - before.captured
    } else {
        after.cref - before.cref
    };
    expect("captured calls run by one launch", ran, n);
    let destroyed = stub::driver_counts()[Count::UserObjectDestroys as usize];
    let dropped = CAPTURED_DROPS.load(Relaxed);
    drop(exec);
    drop(graph);
    // The user objects' destructors hand the closures to the reaper thread, which drops them.
    cuda_hostcb_safe::wait_for_drops().map_err(|e| err("wait_for_drops", e))?;
    let destroyed = stub::driver_counts()[Count::UserObjectDestroys as usize] - destroyed;
    let dropped = CAPTURED_DROPS.load(Relaxed) - dropped;
    let safe = path.kind == Kind::SafeCaptured;
    // However the closures are owned (one user object each, or one for the capture), every
    // user object the capture made goes with the graph, and every closure is dropped once.
    expect("user objects destroyed with the graph", destroyed, made);
    if safe && made == 0 {
        wrong_owner(expect);
    }
    expect(
        "closures dropped with the graph",
        dropped,
        if safe { n } else { 0 },
    );
    Ok(())
}

// ---- the Rust paths -------------------------------------------------------------------------

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_empty() -> i32 {
    0
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_rust_ptr_launch() -> i32 {
    let f = RAW_LAUNCH.load(Relaxed);
    // SAFETY: the address cuGetProcAddress gave for cuLaunchHostFunc at 10000, of this type.
    let f: LaunchFn = unsafe { std::mem::transmute::<*mut c_void, LaunchFn>(f) };
    let stream = STREAM.load(Relaxed);
    // SAFETY: a valid stream and host function. The code is the result, as in C.
    unsafe { f(stream, Some(cref_cb), ptr::null_mut()) }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_rust_ptr_rt13_launch() -> i32 {
    let f = RAW_RT13_LAUNCH.load(Relaxed);
    // SAFETY: the address of the runtime's cudaLaunchHostFunc, of this type.
    let f: LaunchFn = unsafe { std::mem::transmute::<*mut c_void, LaunchFn>(f) };
    // SAFETY: the legacy stream and a valid host function. The code is the result, as in C.
    unsafe { f(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) }
}

// The `_checked` paths: the call as a step of a caller's function that returns a `Result` and
// goes on only on success (`?`), which is how a program uses a call's status. The measured
// function returns 0 when that step succeeded, 1 when it failed (whatever the error), so the
// status must be tested where the call is made, on every path alike.

/// 0 if `step` succeeded, 1 if it failed.
#[inline(always)]
fn failed<E>(step: impl FnOnce() -> Result<(), E>) -> i32 {
    i32::from(step().is_err())
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_rust_ptr_launch_checked() -> i32 {
    failed(|| {
        let f = RAW_LAUNCH.load(Relaxed);
        // SAFETY: the address cuGetProcAddress gave for cuLaunchHostFunc at 10000, of this type.
        let f: LaunchFn = unsafe { std::mem::transmute::<*mut c_void, LaunchFn>(f) };
        let stream = STREAM.load(Relaxed);
        // SAFETY: a valid stream and host function.
        match unsafe { f(stream, Some(cref_cb), ptr::null_mut()) } {
            0 => Ok(()),
            code => Err(code),
        }
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_rust_ptr_rt13_launch_checked() -> i32 {
    failed(|| {
        let f = RAW_RT13_LAUNCH.load(Relaxed);
        // SAFETY: the address of the runtime's cudaLaunchHostFunc, of this type.
        let f: LaunchFn = unsafe { std::mem::transmute::<*mut c_void, LaunchFn>(f) };
        // SAFETY: the legacy stream and a valid host function.
        match unsafe { f(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) } {
            0 => Ok(()),
            code => Err(code),
        }
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_cudarc_launch_checked() -> i32 {
    use cudarc::driver::sys;
    failed(|| {
        let stream: sys::CUstream = STREAM.load(Relaxed).cast();
        // SAFETY: a valid stream and host function.
        unsafe { sys::cuLaunchHostFunc(stream, Some(cref_cb), ptr::null_mut()) }.result()?;
        Ok::<(), cudarc::driver::DriverError>(())
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_cudarc_rt13_launch_checked() -> i32 {
    use cudarc::runtime::sys;
    failed(|| {
        // SAFETY: the legacy stream and a valid host function.
        unsafe { sys::cudaLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) }
            .result()?;
        Ok::<(), cudarc::runtime::result::RuntimeError>(())
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_driver_launch_checked() -> i32 {
    failed(|| {
        let stream = STREAM.load(Relaxed).cast();
        // SAFETY: a valid stream and host function.
        unsafe { cu::cuLaunchHostFunc(stream, Some(cref_cb), ptr::null_mut())? };
        Ok::<(), cuda_hostcb::Error>(())
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_rt13_launch_checked() -> i32 {
    failed(|| {
        // SAFETY: the legacy stream and a valid host function.
        unsafe { rt13::cudaLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut())? };
        Ok::<(), cuda_hostcb::Error>(())
    })
}

/// The code of an error of ours (`-1` for one without a code).
fn code(r: Result<(), cuda_hostcb::Error>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.code().map_or(-1, |c| c as i32),
    }
}

fn safe_code(r: Result<(), cuda_hostcb_safe::Error>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.code().map_or(-1, |c| c as i32),
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_driver_launch() -> i32 {
    let stream = STREAM.load(Relaxed).cast();
    // SAFETY: a valid stream and host function.
    code(unsafe { cu::cuLaunchHostFunc(stream, Some(cref_cb), ptr::null_mut()) })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_rt13_launch() -> i32 {
    // SAFETY: the legacy stream and a valid host function.
    code(unsafe { rt13::cudaLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_rt12_launch() -> i32 {
    // SAFETY: the legacy stream and a valid host function.
    code(unsafe { rt12::cudaLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_query() -> i32 {
    let stream = QUERY_STREAM.load(Relaxed).cast();
    // SAFETY: a valid stream.
    code(unsafe { cu::cuStreamQuery(stream) })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_first() -> i32 {
    // SAFETY: the legacy stream and a valid host function.
    code(unsafe { cu::cuLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) })
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_cudarc_launch() -> i32 {
    use cudarc::driver::sys;
    let stream: sys::CUstream = STREAM.load(Relaxed).cast();
    // SAFETY: a valid stream and host function.
    match unsafe { sys::cuLaunchHostFunc(stream, Some(cref_cb), ptr::null_mut()) }.result() {
        Ok(()) => 0,
        Err(e) => e.0 as i32,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_cudarc_rt13_launch() -> i32 {
    use cudarc::runtime::sys;
    // SAFETY: the legacy stream and a valid host function.
    match unsafe { sys::cudaLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) }
        .result()
    {
        Ok(()) => 0,
        Err(e) => e.0 as i32,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_cudarc_query() -> i32 {
    use cudarc::driver::sys;
    let stream: sys::CUstream = QUERY_STREAM.load(Relaxed).cast();
    // SAFETY: a valid stream.
    match unsafe { sys::cuStreamQuery(stream) }.result() {
        Ok(()) => 0,
        Err(e) => e.0 as i32,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_cudarc_first() -> i32 {
    use cudarc::driver::sys;
    // SAFETY: the legacy stream and a valid host function.
    match unsafe { sys::cuLaunchHostFunc(ptr::null_mut(), Some(cref_cb), ptr::null_mut()) }.result()
    {
        Ok(()) => 0,
        Err(e) => e.0 as i32,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_safe_stream_launch() -> i32 {
    let calls = &SAFE_CALLS;
    safe_code(HANDLES.get().stream.launch(move || bump(calls)))
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_ours_sync() -> i32 {
    let stream = STREAM.load(Relaxed).cast();
    // SAFETY: a valid stream.
    code(unsafe { cu::cuStreamSynchronize(stream) })
}

/// A completion on the idle stream, polled once (its work is done: the stub runs work at once)
/// with a waker that does nothing, and dropped (its event back to the context's pool).
#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_safe_completion() -> i32 {
    let completion = match HANDLES.get().stream.completion() {
        Ok(c) => c,
        Err(e) => return safe_code(Err(e)),
    };
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(completion).poll(&mut cx) {
        std::task::Poll::Ready(r) => safe_code(r),
        std::task::Poll::Pending => -2,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_safe_graph_launch() -> i32 {
    let h = HANDLES.get();
    safe_code(h.exec.launch(&h.stream))
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn hostcb_one_safe_captured() -> i32 {
    let (calls, token) = (&CAPTURED_CALLS, DropCount);
    safe_code(HANDLES.get().capture.launch_fn(move || {
        let _token = &token;
        bump(calls)
    }))
}
