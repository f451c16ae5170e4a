//! GPU tests of the safe layer's executable-node updates, host sync modes, borrowed contexts and
//! graphs, and completion futures. Each case builds what it needs, records in its callbacks,
//! checks on the test thread after synchronising, and destroys what it made.

use std::ffi::c_int;
use std::future::Future;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use cuda_hostcb_safe::{Error, HostSyncMode, SYNC_MODE_DRIVER_VERSION, SyncModeMissing};
use hostcb_gate::trials::{Case, Failed, Outcome, done, wait_count, wait_until};
use hostcb_gate::{expect_at_most, expect_eq, expect_seq};

use crate::{Tally, counter, record, take};
use cuda_hostcb_safe::{self as safe, sys};

/// Whether the headers the safe layer is compiled over (the newest target's) declare host sync
/// modes, and their CTK version.
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        const HOST_FUNC_V2: bool = has_host_func_v2!([$($capability)*]);
        const VERSION: &str = $version;
    };
}

/// `true` if the capability list holds `host_func_v2`.
macro_rules! has_host_func_v2 {
    ([]) => {
        false
    };
    ([host_func_v2 $($rest:ident)*]) => {
        true
    };
    ([$other:ident $($rest:ident)*]) => {
        has_host_func_v2!([$($rest)*])
    };
}

cuda_hostcb::newest_target!(newest);

/// Every case.
pub fn cases() -> Vec<(&'static str, Case)> {
    vec![
        (
            "exec_10000_node_updates_while_launches_are_in_flight",
            exec_10000_node_updates_while_launches_are_in_flight,
        ),
        (
            "exec_update_refusals_and_drops",
            exec_update_refusals_and_drops,
        ),
        ("sync_modes_on_this_driver", sync_modes_on_this_driver),
        (
            "borrowed_non_primary_context_stream_and_graph",
            borrowed_non_primary_context_stream_and_graph,
        ),
        (
            "completion_future_is_woken_by_the_stream",
            completion_future_is_woken_by_the_stream,
        ),
        (
            "completion_futures_in_order_1000",
            completion_futures_in_order_1000,
        ),
        ("completion_of_graph_launches", completion_of_graph_launches),
        (
            "instantiate_with_auto_free_on_launch",
            instantiate_with_auto_free_on_launch,
        ),
    ]
}

/// How long to wait for what CUDA does asynchronously (user-object destructors, a gate).
const WAIT: Duration = Duration::from_secs(30);

/// Waits up to [`WAIT`] until `done()` holds; an error naming `what` if it never does (the
/// watchdog: no case waits forever).
fn watch(what: &str, done: impl FnMut() -> bool) -> Result<(), Failed> {
    if wait_until(WAIT, done) {
        Ok(())
    } else {
        Err(format!("watchdog: {what} did not happen within {WAIT:?}").into())
    }
}

/// The primary context of device 0, current on this thread.
fn current() -> Result<safe::Context, Failed> {
    let ctx = safe::Context::primary(0)?;
    ctx.make_current()?;
    Ok(ctx)
}

/// What every closure of the update case records, by closure index.
struct Book {
    calls: Vec<AtomicUsize>,
    drops: Vec<AtomicUsize>,
    /// Its call count when it was dropped (a call after its drop would show here).
    calls_at_drop: Vec<AtomicUsize>,
    /// Launches whose last node has run.
    completed: AtomicUsize,
}

impl Book {
    fn new(n: usize) -> Arc<Book> {
        let zeros = || (0..n).map(|_| AtomicUsize::new(0)).collect();
        Arc::new(Book {
            calls: zeros(),
            drops: zeros(),
            calls_at_drop: zeros(),
            completed: AtomicUsize::new(0),
        })
    }

    fn load(v: &[AtomicUsize]) -> Vec<usize> {
        v.iter().map(|a| a.load(SeqCst)).collect()
    }
}

/// Owned by closure `i`: records its drop.
struct Mark {
    book: Arc<Book>,
    i: usize,
}

impl Drop for Mark {
    fn drop(&mut self) {
        let calls = self.book.calls[self.i].load(SeqCst);
        self.book.calls_at_drop[self.i].store(calls, SeqCst);
        self.book.drops[self.i].fetch_add(1, SeqCst);
    }
}

/// Closure `i`: counts its call, and, on the last node, the launch's completion.
fn closure(book: &Arc<Book>, i: usize, last: bool) -> impl Fn() + Send + Sync + 'static {
    let mark = Mark {
        book: Arc::clone(book),
        i,
    };
    move || {
        let m = &mark;
        m.book.calls[m.i].fetch_add(1, SeqCst);
        if last {
            m.book.completed.fetch_add(1, SeqCst);
        }
    }
}

const UPDATES: usize = 10_000;
/// At most this many launches wait or run at once (the test waits for the rest).
const IN_FLIGHT: usize = 8;

fn exec_10000_node_updates_while_launches_are_in_flight(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let book = Book::new(UPDATES + 2);

    // Two host nodes, A then B; closures 0 and 1 are the graph's own, 2.. are set by updates
    // (even updates on A, odd on B).
    let graph = safe::Graph::new(&ctx)?;
    let a = graph.add_host_node(&[], closure(&book, 0, false))?;
    let b = graph.add_host_node(&[a], closure(&book, 1, true))?;
    let ids = [a.id(), b.id()];
    let mut exec = graph.instantiate_updatable()?;

    // A gate holds the stream until IN_FLIGHT launches wait behind it, so the first updates
    // happen with launches certainly pending.
    let gate = Arc::new(AtomicBool::new(false));
    let g = Arc::clone(&gate);
    stream.launch(move || {
        while !g.load(SeqCst) {
            thread::sleep(Duration::from_micros(100));
        }
    })?;

    let mut current = [0usize, 1];
    let mut expected = vec![0usize; UPDATES + 2];
    let mut launched = 0usize;
    let mut held_while_gated = Vec::new();
    let mut pending_at_update = 0usize;
    for u in 0..UPDATES {
        if !gate.load(SeqCst) && launched >= IN_FLIGHT {
            gate.store(true, SeqCst);
        }
        watch("a launch finishing, to keep the window", || {
            launched - book.completed.load(SeqCst) < IN_FLIGHT
        })?;
        exec.launch(&stream)?;
        launched += 1;
        expected[current[0]] += 1;
        expected[current[1]] += 1;

        let node = u % 2;
        let i = u + 2;
        exec.set_host_node(ids[node], closure(&book, i, node == 1))?;
        current[node] = i;
        if launched > book.completed.load(SeqCst) {
            pending_at_update += 1;
        }
        if !gate.load(SeqCst) {
            held_while_gated.push(exec.held_closures());
        }
    }
    gate.store(true, SeqCst);
    exec.launch(&stream)?;
    launched += 1;
    expected[current[0]] += 1;
    expected[current[1]] += 1;
    stream.synchronize()?;
    let most = exec.most_held_closures();
    let held_at_end = exec.held_closures();
    let freed_live = Book::load(&book.drops).iter().filter(|&&d| d > 0).count();

    // While the gate held every launch, nothing a pending launch needs was freed: after update
    // u the store held the closures of updates 0..=u (every one was launched before its
    // replacement).
    let want_gated: Vec<usize> = (0..held_while_gated.len()).map(|u| u + 1).collect();
    expect_seq(
        "closures held after each update while the gate held the launches",
        &want_gated,
        &held_while_gated,
    )?;
    expect_seq(
        "calls of each closure (launches made while it was current)",
        &expected,
        &Book::load(&book.calls),
    )?;
    // The bound: the two current closures, one replaced per launch of the window, one more for
    // a launch whose completion was counted before its store call, and the one being replaced.
    // An append-only store would hold all 10,000.
    expect_at_most(
        "the most closures the store held at once",
        2 + IN_FLIGHT + 4,
        most,
    )?;
    drop(exec);
    let all_dropped = || Book::load(&book.drops).iter().all(|&d| d >= 1);
    watch("every closure's drop after the executable's", all_dropped)?;
    thread::sleep(Duration::from_millis(100));
    expect_seq(
        "drops of each closure",
        &vec![1; UPDATES + 2],
        &Book::load(&book.drops),
    )?;
    expect_seq(
        "each closure's calls when it was dropped (none after)",
        &expected,
        &Book::load(&book.calls_at_drop),
    )?;
    println!(
        "exec_updates: {UPDATES} updates, {launched} launches ({pending_at_update} \
         updates with a launch pending), window {IN_FLIGHT}; store held at most {most} closures \
         ({held_at_end} at the end), {freed_live} of {} freed while the executable lived; every \
         closure called as often as it was current and dropped once",
        UPDATES + 2
    );
    done()
}

fn exec_update_refusals_and_drops(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let (calls, drops) = (counter(), counter());
    let bump = |calls: &Arc<AtomicUsize>, drops: &Arc<AtomicUsize>| {
        let (c, tally) = (Arc::clone(calls), Tally(Arc::clone(drops)));
        move || {
            let _keep = &tally;
            c.fetch_add(1, SeqCst);
        }
    };
    let other = safe::Graph::new(&ctx)?;
    let foreign = other.add_host_node(&[], || {})?.id();
    let graph = safe::Graph::new(&ctx)?;
    let node = graph.add_host_node(&[], bump(&calls, &drops))?.id();
    let mut exec = graph.instantiate_updatable()?;

    let refused = exec.set_host_node(foreign, bump(&calls, &drops));
    expect_eq(
        "an update naming another graph's node",
        Err(true),
        refused.map_err(|e| matches!(e, Error::ForeignExecNode)),
    )?;
    expect_eq("drops of the refused closure", 1, drops.load(SeqCst))?;

    // A launch recorded into another graph would outlive the store's order: refused, and
    // nothing is captured.
    let capturing = safe::Stream::new(&ctx)?;
    capturing.begin_capture(cuda_hostcb_safe::CaptureMode::Global)?;
    let refused = exec.launch(&capturing);
    let captured = capturing.end_capture()?;
    expect_eq(
        "a launch on a capturing stream",
        Err(true),
        refused.map_err(|e| matches!(e, Error::CapturedUpdatableLaunch)),
    )?;
    drop(captured);
    expect_eq("calls after the refused launch", 0, calls.load(SeqCst))?;

    // 100 updates with no launch between them: each replaced closure goes at once.
    for _ in 0..100 {
        exec.set_host_node(node, bump(&calls, &drops))?;
    }
    expect_eq(
        "drops after 100 unlaunched updates",
        100,
        drops.load(SeqCst),
    )?;
    expect_eq("closures held", 1, exec.held_closures())?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    expect_eq("calls of the last closure set", 1, calls.load(SeqCst))?;
    drop(exec);
    // The graph's own closure, the current one: both go with the executable (and its graph).
    wait_count("drops after the executable's", &drops, 102, WAIT)?;
    drop(other);
    println!(
        "exec_refusals: a foreign NodeId refused (closure dropped uncalled); 100 \
         unlaunched updates: 100 drops at once, 1 held; then 1 call, {} drops in all",
        drops.load(SeqCst)
    );
    done()
}

/// What a sync-mode call must return here: `Ok` where the bindings and the driver take a sync
/// mode, else the typed error naming what is missing.
fn sync_mode_expected(mode: HostSyncMode) -> Result<Option<SyncModeMissing>, Failed> {
    let mut driver: c_int = 0;
    unsafe { sys::cuDriverGetVersion(&mut driver)? };
    let driver = u32::try_from(driver).unwrap_or(0);
    let _ = mode;
    Ok(if !HOST_FUNC_V2 {
        Some(SyncModeMissing::Target { headers: VERSION })
    } else if driver < SYNC_MODE_DRIVER_VERSION {
        Some(SyncModeMissing::Driver { found: driver })
    } else {
        None
    })
}

/// The missing part of a sync-mode error, or the other error's text.
fn missing(result: Result<(), Error>) -> Result<Option<SyncModeMissing>, String> {
    match result {
        Ok(()) => Ok(None),
        Err(Error::SyncModeUnavailable { missing, .. }) => Ok(Some(missing)),
        Err(other) => Err(other.to_string()),
    }
}

fn sync_modes_on_this_driver(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let mut lines = Vec::new();
    for mode in [HostSyncMode::Blocking, HostSyncMode::SpinWait] {
        let want = sync_mode_expected(mode)?;
        let (calls, drops) = (counter(), counter());
        let (c, tally) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
        let launched = stream.launch_with_sync_mode(mode, move || {
            let _keep = &tally;
            c.fetch_add(1, SeqCst);
        });
        let message = launched.as_ref().err().map(ToString::to_string);
        stream.synchronize()?;
        expect_eq(
            &format!("{mode:?}: Stream::launch_with_sync_mode"),
            Ok(want.clone()),
            missing(launched),
        )?;
        let ran = usize::from(want.is_none());
        expect_eq(&format!("{mode:?}: stream calls"), ran, calls.load(SeqCst))?;
        wait_count(&format!("{mode:?}: stream drops"), &drops, 1, WAIT)?;
        if let Some(message) = &message {
            expect_eq(
                &format!("{mode:?}: the error names the version needed ({message})"),
                true,
                message.contains("from a CUDA 13.2 driver"),
            )?;
        }

        let (calls, drops) = (counter(), counter());
        let graph = safe::Graph::new(&ctx)?;
        let (c, tally) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
        let added = graph
            .add_host_node_with_sync_mode(&[], mode, move || {
                let _keep = &tally;
                c.fetch_add(1, SeqCst);
            })
            .map(|_| ());
        let added = missing(added);
        expect_eq(
            &format!("{mode:?}: Graph::add_host_node_with_sync_mode"),
            Ok(want.clone()),
            added.clone(),
        )?;
        // A plain node to update with a sync mode.
        let plain = graph.add_host_node(&[], || {})?.id();
        let mut exec = graph.instantiate_updatable()?;
        let (c, tally) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
        let set = exec.set_host_node_with_sync_mode(plain, mode, move || {
            let _keep = &tally;
            c.fetch_add(1, SeqCst);
        });
        expect_eq(
            &format!("{mode:?}: UpdatableExec::set_host_node_with_sync_mode"),
            Ok(want.clone()),
            missing(set),
        )?;
        for _ in 0..3 {
            exec.launch(&stream)?;
        }
        stream.synchronize()?;
        // Where sync modes work: the node added with one and the updated node, 3 launches each.
        expect_eq(
            &format!("{mode:?}: graph calls"),
            6 * ran,
            calls.load(SeqCst),
        )?;
        drop(exec);
        wait_count(&format!("{mode:?}: graph drops"), &drops, 2, WAIT)?;
        lines.push(format!(
            "{mode:?}: {}",
            match &want {
                None => "ran on the stream, in a node and after an update".to_owned(),
                Some(m) => format!("refused ({m:?}), closures dropped uncalled"),
            }
        ));
    }
    println!("sync_modes: {}", lines.join("; "));
    done()
}

fn borrowed_non_primary_context_stream_and_graph(_: usize) -> Outcome {
    let _primary = current()?;
    let mut device: sys::CUdevice = 0;
    let mut raw_ctx: sys::CUcontext = ptr::null_mut();
    let mut popped: sys::CUcontext = ptr::null_mut();
    unsafe {
        sys::cuDeviceGet(&mut device, 0)?;
        // A context as another crate makes one; cuCtxCreate makes it current: pop it again.
        sys::cuCtxCreate_v4(&mut raw_ctx, ptr::null_mut(), 0, device)?;
        sys::cuCtxPopCurrent(&mut popped)?;
    }
    let was_current = popped == raw_ctx;
    let result = (|| -> Result<(usize, usize, usize, usize), Failed> {
        // SAFETY: the context lives until after every handle below is gone.
        let ctx = unsafe { safe::Context::borrow_raw(raw_ctx) }?;
        expect_eq("a borrowed context is primary", false, ctx.is_primary())?;
        expect_eq("its device ordinal", 0, ctx.ordinal())?;
        ctx.make_current()?;

        // A stream made through the borrowed context.
        let stream = safe::Stream::new(&ctx)?;
        let calls = counter();
        for _ in 0..100 {
            let c = Arc::clone(&calls);
            stream.launch(move || {
                c.fetch_add(1, SeqCst);
            })?;
        }
        stream.synchronize()?;
        let stream_calls = calls.load(SeqCst);

        // A stream and a graph made by "the other crate" in that context, borrowed.
        let mut raw_stream: sys::CUstream = ptr::null_mut();
        let mut raw_graph: sys::CUgraph = ptr::null_mut();
        unsafe {
            sys::cuStreamCreate(
                &mut raw_stream,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0,
            )?;
            sys::cuGraphCreate(&mut raw_graph, 0)?;
        }
        let (node_calls, drops) = (counter(), counter());
        {
            // SAFETY: both live until this case destroys them below.
            let theirs = unsafe { safe::Stream::borrow_raw(raw_stream) };
            let graph = unsafe { safe::Graph::borrow_raw(raw_graph, Some(&ctx)) };
            let (c, tally) = (Arc::clone(&node_calls), Tally(Arc::clone(&drops)));
            graph.add_host_node(&[], move || {
                let _keep = &tally;
                c.fetch_add(1, SeqCst);
            })?;
            let exec = graph.instantiate()?;
            drop(graph); // leaves their graph alone
            for _ in 0..10 {
                exec.launch(&theirs)?;
            }
            theirs.synchronize()?;
            drop(exec);
        }
        // Their graph survived the wrapper and still holds the closure.
        let mut nodes = 0usize;
        unsafe { sys::cuGraphGetNodes(raw_graph, ptr::null_mut(), &mut nodes)? };
        let drops_before_their_destroy = drops.load(SeqCst);
        unsafe {
            sys::cuGraphDestroy(raw_graph)?;
            sys::cuStreamDestroy(raw_stream)?;
        }
        wait_count("drops after their graph's destruction", &drops, 1, WAIT)?;
        expect_eq("nodes of their graph after the wrapper", 1, nodes)?;
        expect_eq(
            "drops while their graph lived",
            0,
            drops_before_their_destroy,
        )?;
        drop((stream, ctx));
        Ok((
            stream_calls,
            node_calls.load(SeqCst),
            nodes,
            drops.load(SeqCst),
        ))
    })();
    // The borrowed context is still ours to use and destroy.
    let synced = unsafe {
        sys::cuCtxPushCurrent(raw_ctx)
            .and_then(|()| sys::cuCtxSynchronize())
            .and_then(|()| sys::cuCtxPopCurrent(&mut popped))
    }
    .map_err(|e| e.to_string());
    let destroyed = unsafe { sys::cuCtxDestroy_v2(raw_ctx) }.map_err(|e| e.to_string());
    expect_eq("the created context was current", true, was_current)?;
    let (stream_calls, node_calls, nodes, drops) = result?;
    expect_eq(
        "stream closures run in the borrowed context",
        100,
        stream_calls,
    )?;
    expect_eq("host-node calls in their graph", 10, node_calls)?;
    expect_eq("the context after the handles: synchronise", Ok(()), synced)?;
    expect_eq("the context after the handles: destroy", Ok(()), destroyed)?;
    println!(
        "borrowed: non-primary context: {stream_calls} stream closures; their stream \
         and graph: {node_calls} node calls in 10 launches, {nodes} node left after the wrapper, \
         {drops} drop after their destroy"
    );
    done()
}

/// Wakes the thread that blocks on a future, counts the wakes, and records the threads they
/// came from that were neither the blocked thread nor the waiter thread (CUDA's, say).
struct ThreadWaker {
    thread: Thread,
    wakes: AtomicUsize,
    elsewhere: Mutex<Vec<Option<String>>>,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let here = thread::current();
        if here.id() != self.thread.id()
            && here.name() != Some(cuda_hostcb_safe::WAITER_THREAD_NAME)
        {
            self.elsewhere
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(here.name().map(str::to_owned));
        }
        self.wakes.fetch_add(1, SeqCst);
        self.thread.unpark();
    }
}

/// What [`block_on`] saw: the output, the polls, the wakes, and the wakes from a thread other
/// than the blocked one and the waiter.
type Blocked<T> = (T, usize, usize, Vec<Option<String>>);

/// Polls `future` on this thread, again only after a wake, until it is ready; returns what it
/// saw, or an error after [`WAIT`] (the watchdog).
fn block_on<F: Future>(future: F) -> Result<Blocked<F::Output>, Failed> {
    let waker_state = Arc::new(ThreadWaker {
        thread: thread::current(),
        wakes: AtomicUsize::new(0),
        elsewhere: Mutex::new(Vec::new()),
    });
    let waker = Waker::from(Arc::clone(&waker_state));
    let mut cx = TaskContext::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let start = Instant::now();
    let mut polls = 0;
    let mut seen_wakes = 0;
    loop {
        polls += 1;
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            let elsewhere = take(&waker_state.elsewhere);
            return Ok((out, polls, waker_state.wakes.load(SeqCst), elsewhere));
        }
        // Poll again only once woken (a park can return spuriously).
        while waker_state.wakes.load(SeqCst) == seen_wakes {
            if start.elapsed() > WAIT {
                return Err(format!("watchdog: not woken within {:?}", WAIT).into());
            }
            thread::park_timeout(Duration::from_millis(10));
        }
        seen_wakes = waker_state.wakes.load(SeqCst);
    }
}

/// The most polls a completion may take while its work runs for 100 ms: it checks on the task
/// for 100 us (`COMPLETION_SPIN`), then sleeps until the waiter wakes it. A future that checked
/// on the task all along would poll hundreds of thousands of times.
const POLLS_OVER_100_MS: usize = 20_000;

fn completion_future_is_woken_by_the_stream(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let ran = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ran);
    stream.launch(move || {
        thread::sleep(Duration::from_millis(100));
        r.store(true, SeqCst);
    })?;
    let completion = stream.completion()?;
    let signalled_at_once = completion.is_signalled();
    let (out, polls, wakes, elsewhere) = block_on(completion)?;
    let ran_before = ran.load(SeqCst);
    expect_eq(
        "signalled before the work ahead ran",
        false,
        signalled_at_once,
    )?;
    expect_eq("output", Ok(()), out.map_err(|e| e.to_string()))?;
    expect_eq("the closure ahead ran before it resolved", true, ran_before)?;
    expect_at_most("polls over a 100 ms wait", POLLS_OVER_100_MS, polls)?;
    expect_eq("a wake for every poll after the first", polls - 1, wakes)?;
    expect_eq(
        "wakes from threads other than the task's and the waiter's (CUDA's)",
        Vec::new(),
        elsewhere,
    )?;

    // Polled from a thread that is not the stream's owner (no current context), after the
    // stream is dropped.
    let r = Arc::clone(&ran);
    r.store(false, SeqCst);
    stream.launch(move || {
        thread::sleep(Duration::from_millis(50));
        r.store(true, SeqCst);
    })?;
    let completion = stream.completion()?;
    drop(stream);
    let waited = thread::spawn(move || {
        block_on(completion).map(|(out, polls, _, _)| (out.map_err(|e| e.to_string()), polls))
    })
    .join()
    .map_err(|_| Failed::from("the waiting thread panicked"))??;
    expect_eq(
        "awaited on another thread after the stream's drop",
        (Ok(()), true),
        (waited.0, ran.load(SeqCst)),
    )?;

    // Dropped while the waiter holds it: forgotten; the next one still resolves.
    let stream = safe::Stream::new(&ctx)?;
    stream.launch(|| thread::sleep(Duration::from_millis(20)))?;
    let mut dropped = stream.completion()?;
    let noop = Waker::noop();
    let mut cx = TaskContext::from_waker(noop);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2) {
        let _ = std::pin::Pin::new(&mut dropped).poll(&mut cx);
    }
    drop(dropped);
    let (after, _, _, _) = block_on(stream.completion()?)?;
    expect_eq(
        "a completion after one dropped while pending",
        Ok(()),
        after.map_err(|e| e.to_string()),
    )?;
    println!(
        "completion: resolved after 100 ms of work ahead in {polls} polls ({wakes} \
         wakes, none from CUDA's threads); also on another thread after the stream's drop, and \
         after a pending one was dropped"
    );
    done()
}

/// `GraphExec::launch_completion` and `UpdatableExec::launch_completion`: the future resolves
/// after the launch's host node ran, once per launch.
fn completion_of_graph_launches(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let calls = counter();
    let graph = safe::Graph::new(&ctx)?;
    let c = Arc::clone(&calls);
    let node = graph
        .add_host_node(&[], move || {
            thread::sleep(Duration::from_millis(1));
            c.fetch_add(1, SeqCst);
        })?
        .id();
    let exec = graph.instantiate()?;
    let mut seen = Vec::new();
    for _ in 0..20 {
        let (out, _, _, _) = block_on(exec.launch_completion(&stream)?)?;
        out?;
        seen.push(calls.load(SeqCst));
    }
    let mut updatable = graph.instantiate_updatable()?;
    let c = Arc::clone(&calls);
    updatable.set_host_node(node, move || {
        c.fetch_add(100, SeqCst);
    })?;
    for _ in 0..20 {
        let (out, _, _, _) = block_on(updatable.launch_completion(&stream)?)?;
        out?;
        seen.push(calls.load(SeqCst));
    }
    let want: Vec<usize> = (1..=20).chain((1..=20).map(|i| 20 + 100 * i)).collect();
    expect_seq(
        "host-node calls when each launch's completion resolved",
        &want,
        &seen,
    )?;
    println!(
        "completion_of_graph_launches: 20 GraphExec and 20 UpdatableExec launches, each \
         completion resolved after its host node"
    );
    done()
}

fn completion_futures_in_order_1000(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut seen_at_completion = Vec::new();
    let mut total_polls = 0;
    for i in 0..1000u32 {
        let l = Arc::clone(&log);
        stream.launch(move || record(&l, i))?;
        let (out, polls, _, _) = block_on(stream.completion()?)?;
        out?;
        total_polls += polls;
        seen_at_completion.push(log.lock().unwrap_or_else(|e| e.into_inner()).len());
    }
    let want: Vec<usize> = (1..=1000).collect();
    expect_seq(
        "closures run when each completion resolved",
        &want,
        &seen_at_completion,
    )?;
    expect_seq("closure order", &(0..1000).collect::<Vec<_>>(), &take(&log))?;
    // Each waits about a host function's latency, under the spin: bounded polls per completion.
    expect_at_most(
        "polls of 1000 completions",
        1000 * POLLS_OVER_100_MS,
        total_polls,
    )?;
    println!("completion_1000: each resolved after its closure; {total_polls} polls");
    done()
}

/// A graph whose allocation node's memory no node frees: CUDA refuses to launch its executable
/// again while that memory is allocated, unless the graph was instantiated to free it on launch,
/// which the safe layer passes (`Instantiate::auto_free_on_launch`, here with an upload). The
/// graph's host-node closure is owned as with any instantiation: called once per launch, dropped
/// once, after the executables.
fn instantiate_with_auto_free_on_launch(_: usize) -> Outcome {
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let (calls, drops) = (counter(), counter());
    let graph = safe::Graph::new(&ctx)?;
    let host = {
        let (c, tally) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
        graph.add_host_node(&[], move || {
            let _keep = &tally;
            c.fetch_add(1, SeqCst);
        })?
    };
    // SAFETY: all-zero is a valid value of this plain C struct (device 0, no access list).
    let mut params: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
    params.poolProps.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    params.bytesize = 1 << 20;
    let dep = host.as_raw();
    let mut alloc = ptr::null_mut();
    // SAFETY: the graph and its node are valid; valid in and out pointers.
    unsafe { sys::cuGraphAddMemAllocNode(&mut alloc, graph.as_raw(), &dep, 1, &mut params)? };

    // Without the flag: the second launch is refused while the first one's memory is held.
    let plain = graph.instantiate()?;
    plain.launch(&stream)?;
    stream.synchronize()?;
    let refused = plain.launch(&stream);
    stream.synchronize()?;
    let refused_as = refused.as_ref().err().map(|e| e.to_string());
    expect_eq(
        "a relaunch without the flag refused",
        true,
        refused.is_err(),
    )?;
    // SAFETY: the first launch allocated `dptr`, which nothing else uses or frees.
    unsafe { sys::cuMemFreeAsync(params.dptr, stream.as_raw())? };
    stream.synchronize()?;
    // A graph with memory nodes has one executable at a time.
    drop(plain);

    let flags = safe::Instantiate::new()
        .auto_free_on_launch()
        .upload(&stream);
    let freeing = graph.instantiate_with(flags)?;
    for _ in 0..3 {
        freeing.launch(&stream)?;
    }
    stream.synchronize()?;
    // SAFETY: the last launch allocated `dptr`, which nothing else uses or frees.
    unsafe { sys::cuMemFreeAsync(params.dptr, stream.as_raw())? };
    stream.synchronize()?;
    expect_eq(
        "host-node calls (1 plain launch, 3 freeing ones)",
        4,
        calls.load(SeqCst),
    )?;
    drop(freeing);
    drop(graph);
    wait_count("drops of the graph's closure", &drops, 1, WAIT)?;
    println!(
        "instantiate_flags: without AUTO_FREE_ON_LAUNCH the relaunch was refused ({}); with it \
         (and an upload) 3 launches ran; the closure was called {} times, dropped {} time(s)",
        refused_as.unwrap_or_default(),
        calls.load(SeqCst),
        drops.load(SeqCst)
    );
    done()
}
