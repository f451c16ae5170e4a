//! GPU tests of sticky errors: a PTX kernel that executes `trap;` poisons its context, so the
//! trial runs it in a child process (this executable again, with `HOSTCB_STICKY_CHILD=1`), which
//! prints what it observed on one `OBSERVED` line; the trial checks that line. Around the
//! kernel: one-shot closures before it (called) and after it (skipped), a completion future and
//! a thread waiting on a closure after it, and a graph of host nodes and a captured graph,
//! launched before and after it. Every closure must be called or dropped exactly once, every
//! waiter must return, nothing may hang (a watchdog in the child, a deadline in the parent), and
//! the error must name what happened.
//!
//! Below: the parent (runs the child, checks its line), then the child itself.

use std::ffi::CStr;
use std::future::Future;
use std::pin::pin;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use cuda_hostcb_safe::{self as safe, sys};
use cuda_hostcb_safe::{CaptureMode, Error, REAPER_THREAD_NAME, wait_for_drops};
use hostcb_gate::trials::{Case, Failed, Outcome, Watchdog, done, run_child, wait_until};
use hostcb_gate::{expect_eq, expect_that};

/// The variable that makes this executable the child of the trial.
pub const CHILD_ENV: &str = "HOSTCB_STICKY_CHILD";

/// A kernel that stops at once with a trap, which leaves its context unusable.
const PTX: &CStr = c".version 8.0
.target sm_75
.address_size 64

.visible .entry hostcb_trap()
{
    trap;
}
";

/// One-shot closures per kind (`launch`, `launch_fn`), before the kernel and after it.
const ONE_SHOT: usize = 100;
/// Host nodes in the graph, and closures in the captured graph.
const NODES: usize = 10;
const CAPTURED: usize = 100;
/// `CUDA_ERROR_LAUNCH_FAILED`: what a trap leaves (measured on the H200).
const LAUNCH_FAILED: u32 = 719;
/// How long the child may run before its watchdog ends it, and the parent waits.
const CHILD_LIMIT: Duration = Duration::from_secs(90);
const PARENT_LIMIT: Duration = Duration::from_secs(150);

/// Every case.
pub fn cases() -> Vec<(&'static str, Case)> {
    vec![(
        "trap_every_closure_called_or_dropped_once_and_reported",
        |_| trap_every_closure_called_or_dropped_once_and_reported(),
    )]
}

// ---- the parent ---------------------------------------------------------------------------

fn trap_every_closure_called_or_dropped_once_and_reported() -> Outcome {
    let run = run_child(&[(CHILD_ENV, Some("1"))], PARENT_LIMIT)?;
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    let Some(status) = run.status else {
        return Err(format!(
            "the child hung past {PARENT_LIMIT:?} and was killed:\n{stdout}{stderr}"
        )
        .into());
    };
    let line = stdout.lines().find_map(|l| l.strip_prefix("OBSERVED "));
    let Some(seen) = run.observed() else {
        return Err(
            format!("the child ({status}) printed no OBSERVED line:\n{stdout}{stderr}").into(),
        );
    };
    let line = line.unwrap_or_default();
    let get = |key: &str| seen.get(key).copied().unwrap_or("(missing)");
    let want = |key: &str, value: String| expect_eq(key, value, get(key).to_owned());

    let tail: String = stderr
        .lines()
        .rev()
        .take(20)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    expect_eq(
        &format!("the child's exit ({status}; its stderr ends: {tail})"),
        true,
        status.success(),
    )?;
    // Before the kernel: every closure called once and dropped once.
    want("before_calls", (2 * ONE_SHOT).to_string())?;
    want("before_drops", (2 * ONE_SHOT).to_string())?;
    want("graphs_before_calls", (NODES + CAPTURED).to_string())?;
    // After it: accepted (the kernel waits behind a gate), never called, each dropped once.
    want("after_accepted", (2 * ONE_SHOT).to_string())?;
    want("after_calls", "0".to_owned())?;
    want("after_drops", (2 * ONE_SHOT).to_string())?;
    // The error names what happened: every skipped closure of the stream (the 200 and the
    // waiter's; a completion holds none), the status CUDA passed them, the failed
    // synchronisation.
    want("sync", "HostFunctionsSkipped".to_owned())?;
    want("sync_skipped", (2 * ONE_SHOT + 1).to_string())?;
    want("sync_code", LAUNCH_FAILED.to_string())?;
    expect_that(
        "the callbacks' status is an error (CUDA's name for it in sync_status_name)",
        !matches!(get("sync_status"), "0" | "(missing)"),
        format!("{} ({})", get("sync_status"), get("sync_status_name")),
    )?;
    expect_that(
        "the error's text says the host functions were not called and why",
        get("sync_text").contains("host function(s) of this stream were not called")
            && get("sync_text").contains("CUDA_ERROR_LAUNCH_FAILED"),
        get("sync_text"),
    )?;
    // Nobody waits forever.
    want("completion", "CompletionAbandoned".to_owned())?;
    want("waiter", "disconnected".to_owned())?;
    // The graphs' closures: not called after the error, dropped once with their graphs.
    want("graphs_after_calls", "0".to_owned())?;
    want("node_drops", NODES.to_string())?;
    want("captured_drops", CAPTURED.to_string())?;
    // Every drop on the reaper thread; none on CUDA's.
    want(
        "drops_on_reaper",
        (4 * ONE_SHOT + NODES + CAPTURED).to_string(),
    )?;
    want("drops_on_unnamed_threads", "0".to_owned())?;
    println!("trap: {line}");
    done()
}

// ---- the child ----------------------------------------------------------------------------

/// What every marked closure records.
#[derive(Default)]
struct Log {
    calls: [AtomicUsize; 4],
    drops: [AtomicUsize; 4],
    on_reaper: AtomicUsize,
    on_program: AtomicUsize,
    on_unnamed: AtomicUsize,
}

const BEFORE: usize = 0;
const AFTER: usize = 1;
const NODE: usize = 2;
const CAPTURE: usize = 3;

/// Owned by a closure of kind `kind`: records its drop and the thread.
struct Mark {
    log: Arc<Log>,
    kind: usize,
}

impl Drop for Mark {
    fn drop(&mut self) {
        match thread::current().name() {
            Some(REAPER_THREAD_NAME) => self.log.on_reaper.fetch_add(1, SeqCst),
            Some(_) => self.log.on_program.fetch_add(1, SeqCst),
            None => self.log.on_unnamed.fetch_add(1, SeqCst),
        };
        self.log.drops[self.kind].fetch_add(1, SeqCst);
    }
}

fn marked(log: &Arc<Log>, kind: usize) -> impl Fn() + Send + Sync + 'static {
    let mark = Mark {
        log: Arc::clone(log),
        kind,
    };
    move || {
        mark.log.calls[mark.kind].fetch_add(1, SeqCst);
    }
}

fn load(counters: &[AtomicUsize; 4], kind: usize) -> usize {
    counters[kind].load(SeqCst)
}

/// Runs the scenario, prints the `OBSERVED` line and exits.
pub fn child() -> ! {
    let watchdog = Watchdog::arm("the child".to_owned(), CHILD_LIMIT);
    let mut seen: Vec<(String, String)> = Vec::new();
    let result = observe(&mut seen);
    drop(watchdog);
    let line: Vec<String> = seen
        .iter()
        .map(|(k, v)| format!("{k}={}", v.replace([';', '\n'], " ")))
        .collect();
    println!("OBSERVED {}", line.join(";"));
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("child: {e:?}");
            std::process::exit(2)
        }
    }
}

fn observe(seen: &mut Vec<(String, String)>) -> Result<(), Failed> {
    let mut note = |k: &str, v: String| seen.push((k.to_owned(), v));
    let ctx = safe::Context::primary(0)?;
    ctx.make_current()?;
    let stream = safe::Stream::new(&ctx)?;
    let side = safe::Stream::new(&ctx)?;
    let log = Arc::new(Log::default());

    let (mut module, mut kernel) = (ptr::null_mut(), ptr::null_mut());
    unsafe {
        sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast())?;
        sys::cuModuleGetFunction(&mut kernel, module, c"hostcb_trap".as_ptr())?;
    }

    // The graphs, made and launched once before the kernel: their closures are live.
    let graph = safe::Graph::new(&ctx)?;
    for _ in 0..NODES {
        graph.add_host_node(&[], marked(&log, NODE))?;
    }
    let nodes = graph.instantiate()?;
    side.begin_capture(CaptureMode::ThreadLocal)?;
    let mut captured = Ok(());
    for _ in 0..CAPTURED {
        captured = captured.and(side.launch_fn(marked(&log, CAPTURE)));
    }
    let capture = side.end_capture()?;
    captured?;
    let replay = capture.instantiate()?;
    nodes.launch(&stream)?;
    replay.launch(&stream)?;
    stream.synchronize()?;
    let graphs_before = load(&log.calls, NODE) + load(&log.calls, CAPTURE);
    note("graphs_before_calls", graphs_before.to_string());

    // Before the kernel: one-shot closures, then a gate that holds the kernel back until every
    // closure after it is enqueued.
    for _ in 0..ONE_SHOT {
        stream.launch(marked(&log, BEFORE))?;
        stream.launch_fn(marked(&log, BEFORE))?;
    }
    let gate = Arc::new(AtomicBool::new(false));
    let g = Arc::clone(&gate);
    stream.launch(move || {
        wait_until(Duration::from_secs(30), || g.load(SeqCst));
    })?;
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
            stream.as_raw(),
            ptr::null_mut(),
            ptr::null_mut(),
        )?;
    }

    // After it.
    let mut accepted = 0;
    for _ in 0..ONE_SHOT {
        accepted += usize::from(stream.launch(marked(&log, AFTER)).is_ok());
        accepted += usize::from(stream.launch_fn(marked(&log, AFTER)).is_ok());
    }
    note("after_accepted", accepted.to_string());
    let (tx, rx) = mpsc::channel::<()>();
    stream.launch(move || {
        let _ = tx.send(());
    })?;
    let waiter = thread::spawn(move || match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => "called",
        Err(mpsc::RecvTimeoutError::Disconnected) => "disconnected",
        Err(mpsc::RecvTimeoutError::Timeout) => "timed out",
    });
    let completion = stream.completion()?;
    let node_launch = nodes.launch(&stream);
    let replay_launch = replay.launch(&stream);
    gate.store(true, SeqCst);

    let synced = stream.synchronize();
    match &synced {
        Err(Error::HostFunctionsSkipped {
            skipped,
            status,
            source,
        }) => {
            note("sync", "HostFunctionsSkipped".to_owned());
            note("sync_skipped", skipped.to_string());
            note("sync_status", status.to_string());
            let name = cuda_hostcb::Error::Cuda {
                api: cuda_hostcb::error::Api::Driver,
                function: "",
                code: *status,
            };
            note("sync_status_name", name.name().unwrap_or("?").to_owned());
            note("sync_source", source.to_string());
        }
        Err(other) => note("sync", format!("{other:?}")),
        Ok(()) => note("sync", "Ok".to_owned()),
    }
    note(
        "sync_code",
        synced
            .as_ref()
            .err()
            .and_then(Error::code)
            .map_or("none".to_owned(), |c| c.to_string()),
    );
    note(
        "sync_text",
        synced
            .as_ref()
            .err()
            .map_or(String::new(), ToString::to_string),
    );
    note("node_launch_after", format!("{node_launch:?}"));
    note("replay_launch_after", format!("{replay_launch:?}"));
    note("completion", block_on(completion, Duration::from_secs(30)));
    note("waiter", waiter.join().unwrap_or("panicked").to_owned());
    wait_for_drops()?;
    note("before_calls", load(&log.calls, BEFORE).to_string());
    note("before_drops", load(&log.drops, BEFORE).to_string());
    note("after_calls", load(&log.calls, AFTER).to_string());
    note("after_drops", load(&log.drops, AFTER).to_string());
    note(
        "graphs_after_calls",
        (load(&log.calls, NODE) + load(&log.calls, CAPTURE) - graphs_before).to_string(),
    );

    // The graphs' closures go with the graphs and executables, whatever the context's state.
    drop((nodes, graph, replay, capture));
    wait_until(Duration::from_secs(30), || {
        load(&log.drops, NODE) >= NODES && load(&log.drops, CAPTURE) >= CAPTURED
    });
    wait_for_drops()?;
    note("node_drops", load(&log.drops, NODE).to_string());
    note("captured_drops", load(&log.drops, CAPTURE).to_string());
    drop((stream, side));
    let _ = unsafe { sys::cuModuleUnload(module) };
    drop(ctx);
    wait_for_drops()?;
    thread::sleep(Duration::from_millis(200));
    note("drops_on_reaper", log.on_reaper.load(SeqCst).to_string());
    note(
        "drops_on_program_threads",
        log.on_program.load(SeqCst).to_string(),
    );
    note(
        "drops_on_unnamed_threads",
        log.on_unnamed.load(SeqCst).to_string(),
    );
    note(
        "total_drops",
        log.drops
            .iter()
            .map(|d| d.load(SeqCst))
            .sum::<usize>()
            .to_string(),
    );
    Ok(())
}

/// Polls `future` on this thread, parking between wake-ups, for up to `limit`; the outcome's
/// name.
fn block_on(future: impl Future<Output = Result<(), Error>>, limit: Duration) -> String {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = TaskContext::from_waker(&waker);
    let mut future = pin!(future);
    let start = Instant::now();
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(())) => return "Ok".to_owned(),
            Poll::Ready(Err(Error::CompletionAbandoned)) => {
                return "CompletionAbandoned".to_owned();
            }
            Poll::Ready(Err(other)) => return format!("{other:?}"),
            Poll::Pending if start.elapsed() > limit => return "still pending".to_owned(),
            Poll::Pending => thread::park_timeout(Duration::from_millis(100)),
        }
    }
}
