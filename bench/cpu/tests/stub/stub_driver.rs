//! The safe layer over the stub driver (`stub/cuda_stub.c`), no GPU: the stub runs everything
//! at once, on the calling thread (a stream's callbacks and a graph's host nodes inside the
//! launch).
//!
//! - A failed context (`hostcb_stub_fail_context`): CUDA makes the stream callbacks of one-shot
//!   closures with the context's error, so each closure is dropped uncalled, on the reaper
//!   thread, exactly once, and `Stream::synchronize` names what happened; a completion future
//!   resolves; a host node's closure is dropped on the reaper thread too.
//! - Teardown: handles dropped inside a callback right before the program's last context
//!   handle are destroyed before the context's release (the stub counts a stream or event
//!   destroyed after the release of the context it was made in), and a program that only
//!   launches a graph sees the handles its host nodes drop destroyed without another call.
//!
//! The stub is the one `bench/cpu/build.rs` built on this machine (`HOSTCB_STUB_DIR`); where it is
//! not (an executable carried to another machine), each test says so and passes.

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use cuda_hostcb_safe::{
    Context, Error, Graph, HostSyncMode, REAPER_THREAD_NAME, Stream, SyncModeMissing, sys,
    wait_for_drops,
};

/// `CUDA_ERROR_LAUNCH_FAILED`, the error a trapped kernel leaves.
const LAUNCH_FAILED: i32 = 719;

/// The stub's counters this test reads (`hostcb_stub_count`'s indices in `cuda_stub.c`).
const COUNT_STREAM_DESTROYS: i32 = 16;
const COUNT_DESTROYED_AFTER_RELEASE: i32 = 17;

/// The stub, loaded once for the process (`CUDA_HOSTCB_LIBCUDA` set before any CUDA call),
/// and held by one test at a time: they share its state.
struct Stub {
    lib: libloading::Library,
}

impl Stub {
    fn count(&self, what: i32) -> u64 {
        // SAFETY: the stub's own counter function, of this signature.
        unsafe {
            let count: libloading::Symbol<unsafe extern "C" fn(i32) -> u64> =
                self.lib.get(b"hostcb_stub_count\0").unwrap();
            count(what)
        }
    }

    fn control(&self, name: &[u8], value: i32) {
        // SAFETY: one of the stub's own control functions, which take one int.
        unsafe {
            let f: libloading::Symbol<unsafe extern "C" fn(i32)> = self.lib.get(name).unwrap();
            f(value)
        }
    }
}

/// The stub, locked for the calling test; `None` (after a `SKIP` line) where it is not built.
fn stub() -> Option<(MutexGuard<'static, ()>, &'static Stub)> {
    static LOCK: Mutex<()> = Mutex::new(());
    static STUB: OnceLock<Option<Stub>> = OnceLock::new();
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let stub = STUB.get_or_init(|| {
        let path = PathBuf::from(env!("HOSTCB_STUB_DIR")).join("libcuda.so.1");
        if !path.is_file() {
            return None;
        }
        // SAFETY: set once, under the lock, before any test of this process calls CUDA (each
        // of this module takes the stub first; `driver_versions` calls CUDA only in its child
        // processes); every other thread reads the environment through std, under its lock.
        unsafe { std::env::set_var("CUDA_HOSTCB_LIBCUDA", &path) };
        // SAFETY: the stub, which the safe layer loads too (the same library).
        let stub = Stub {
            lib: unsafe { libloading::Library::new(&path) }.unwrap(),
        };
        // A 13.2 driver, which takes sync modes (cuLaunchHostFunc_v2), before anything asks
        // (entry points resolve once per process).
        stub.control(b"hostcb_stub_set_driver_version\0", 13020);
        Some(stub)
    });
    match stub {
        Some(stub) => Some((guard, stub)),
        None => {
            println!(
                "SKIP: the stub driver is not in {} (built by bench/cpu/build.rs)",
                env!("HOSTCB_STUB_DIR")
            );
            None
        }
    }
}

#[derive(Default)]
struct Log {
    calls: AtomicUsize,
    drops: AtomicUsize,
    threads: Mutex<Vec<Option<String>>>,
}

struct Mark(Arc<Log>);

impl Drop for Mark {
    fn drop(&mut self) {
        let name = std::thread::current().name().map(str::to_owned);
        self.0.threads.lock().unwrap().push(name);
        self.0.drops.fetch_add(1, SeqCst);
    }
}

fn marked(log: &Arc<Log>) -> impl Fn() + Send + Sync + 'static {
    let mark = Mark(Arc::clone(log));
    move || {
        mark.0.calls.fetch_add(1, SeqCst);
    }
}

fn on_reaper(log: &Log) -> usize {
    let threads = log.threads.lock().unwrap();
    threads
        .iter()
        .filter(|n| n.as_deref() == Some(REAPER_THREAD_NAME))
        .count()
}

/// Polls a future that the stub has already resolved (it runs host functions at once).
fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    struct Nothing;
    impl Wake for Nothing {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Nothing));
    pin!(future).poll(&mut TaskContext::from_waker(&waker))
}

#[test]
fn a_failed_context_drops_every_closure_once_and_synchronize_names_it() {
    let Some((_lock, stub)) = stub() else { return };
    let fail_context = |code| stub.control(b"hostcb_stub_fail_context\0", code);

    let ctx = Context::primary(0).unwrap();
    ctx.make_current().unwrap();
    let stream = Stream::new(&ctx).unwrap();

    // Healthy: called, then dropped on the reaper thread. Sync-mode closures too, where the
    // headers the safe layer is compiled over (the newest target's) declare them.
    let healthy = Arc::new(Log::default());
    let sync_mode = match stream.launch_with_sync_mode(HostSyncMode::SpinWait, marked(&healthy)) {
        Ok(()) => true,
        Err(Error::SyncModeUnavailable {
            missing: SyncModeMissing::Target { .. },
            ..
        }) => false,
        Err(e) => panic!("launch_with_sync_mode on a 13.2 driver: {e}"),
    };
    let per_round = if sync_mode { 3 } else { 2 };
    for i in 0..10 {
        stream.launch(marked(&healthy)).unwrap();
        stream.launch_fn(marked(&healthy)).unwrap();
        if sync_mode && i > 0 {
            stream
                .launch_with_sync_mode(HostSyncMode::Blocking, marked(&healthy))
                .unwrap();
        }
    }
    stream.synchronize().unwrap();
    wait_for_drops().unwrap();
    assert_eq!(healthy.calls.load(SeqCst), 10 * per_round);
    assert_eq!(healthy.drops.load(SeqCst), 10 * per_round);
    assert_eq!(on_reaper(&healthy), 10 * per_round);

    // Failed: every callback made with the error, every closure dropped uncalled, once. A
    // sync-mode closure's host function is skipped, and its guard drops it.
    fail_context(LAUNCH_FAILED);
    let failed = Arc::new(Log::default());
    for _ in 0..10 {
        stream.launch(marked(&failed)).unwrap();
        stream.launch_fn(marked(&failed)).unwrap();
        if sync_mode {
            stream
                .launch_with_sync_mode(HostSyncMode::SpinWait, marked(&failed))
                .unwrap();
        }
    }
    let skipped_closures = 10 * per_round as u32;
    let completion = stream.completion().unwrap();
    let synced = stream.synchronize();
    match &synced {
        Err(Error::HostFunctionsSkipped {
            skipped,
            status,
            source,
        }) => {
            // The closures only: a completion holds no closure (it checks an event).
            assert_eq!(*skipped, skipped_closures, "the closures");
            assert_eq!(*status, LAUNCH_FAILED as u32);
            assert_eq!(source.code(), Some(LAUNCH_FAILED as u32));
        }
        other => panic!("synchronize after the failure: {other:?}"),
    }
    let text = synced.unwrap_err().to_string();
    assert!(
        text.starts_with(&format!(
            "{skipped_closures} host function(s) of this stream were not called"
        ))
            && text.contains("with CUDA_ERROR_LAUNCH_FAILED (719) instead of running them")
            && text.ends_with("cuStreamSynchronize failed with CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure"),
        "{text}"
    );
    wait_for_drops().unwrap();
    // Its event reports the context's error.
    assert!(
        matches!(
            poll_once(completion),
            Poll::Ready(Err(Error::CompletionAbandoned))
        ),
        "the completion resolves"
    );
    assert_eq!(failed.calls.load(SeqCst), 0);
    assert_eq!(failed.drops.load(SeqCst), 10 * per_round);
    assert_eq!(on_reaper(&failed), 10 * per_round);
    // Reported once; the context's error stays.
    assert!(
        matches!(stream.synchronize(), Err(Error::Cuda(e)) if e.code() == Some(LAUNCH_FAILED as u32))
    );

    // Healthy again (the stub's reset; a real context stays failed).
    fail_context(0);
    let after = Arc::new(Log::default());
    stream.launch(marked(&after)).unwrap();
    stream.synchronize().unwrap();

    // A host node's closure, whose user object the stub destroys on this thread inside
    // cuGraphDestroy: dropped on the reaper thread all the same.
    let graph = Graph::new(&ctx).unwrap();
    graph.add_host_node(&[], marked(&after)).unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    drop(exec);
    drop(graph);
    wait_for_drops().unwrap();
    assert_eq!(after.calls.load(SeqCst), 2);
    assert_eq!(after.drops.load(SeqCst), 2);
    assert_eq!(on_reaper(&after), 2);
    println!(
        "failed context over the stub: {} healthy closures called and dropped on {REAPER_THREAD_NAME} \
         (sync-mode ones {}); {skipped_closures} skipped ones dropped uncalled there, reported as: {text}",
        10 * per_round,
        if sync_mode {
            "included"
        } else {
            "not declared by the newest target"
        },
    );
}

/// What a callback drops in [`handles_dropped_in_callbacks_go_before_their_context`].
#[derive(Clone, Copy, Debug)]
enum Victim {
    Stream,
    Graph,
    GraphExec,
    Completion,
}

impl Victim {
    fn make(self, ctx: &Context) -> Box<dyn Send> {
        match self {
            Victim::Stream => Box::new(Stream::new(ctx).unwrap()),
            Victim::Graph => {
                let graph = Graph::new(ctx).unwrap();
                graph.add_host_node(&[], || {}).unwrap();
                Box::new(graph)
            }
            Victim::GraphExec => {
                let graph = Graph::new(ctx).unwrap();
                graph.add_host_node(&[], || {}).unwrap();
                Box::new(graph.instantiate().unwrap())
            }
            // Not polled: its event is destroyed, not pooled.
            Victim::Completion => Box::new(Stream::new(ctx).unwrap().completion().unwrap()),
        }
    }
}

/// The GPU test's round (`safe/tests/gpu/reaper/teardown.rs`), made deterministic: the stub calls
/// the callback inside the launch, on this thread, and the stream it is launched on is a
/// borrowed one, whose drop destroys nothing, so the program's next call after the callback is
/// the drop of its last context handle, with the victim's destruction still queued (unless the
/// reaper ran it already). Before the fix that drop released the context first and ran the
/// queued destruction after it: the stub counts each such stream or event.
#[test]
fn handles_dropped_in_callbacks_go_before_their_context() {
    let Some((_lock, stub)) = stub() else { return };
    const ROUNDS: usize = 200;
    let after_release = stub.count(COUNT_DESTROYED_AFTER_RELEASE);
    for victim in [
        Victim::Stream,
        Victim::Graph,
        Victim::GraphExec,
        Victim::Completion,
    ] {
        for round in 0..ROUNDS {
            let ctx = Context::primary(0).unwrap();
            ctx.make_current().unwrap();
            let mut raw: sys::CUstream = std::ptr::null_mut();
            // SAFETY: a valid out-pointer, in the current context; destroyed below.
            unsafe { sys::cuStreamCreate(&mut raw, 0) }.unwrap();
            // SAFETY: the stream lives until the `cuStreamDestroy` below, after `s`.
            let s = unsafe { Stream::borrow_raw(raw) };
            let mut keep = Some(victim.make(&ctx));
            let ran = Arc::new(AtomicBool::new(false));
            let r = Arc::clone(&ran);
            s.launch(move || {
                drop(keep.take());
                r.store(true, SeqCst);
            })
            .unwrap();
            drop(s);
            assert!(
                ran.load(SeqCst),
                "the stub runs the callback inside the launch"
            );
            // SAFETY: the raw stream made above, no longer used.
            unsafe { sys::cuStreamDestroy(raw) }.unwrap();
            drop(ctx);
            assert_eq!(
                stub.count(COUNT_DESTROYED_AFTER_RELEASE) - after_release,
                0,
                "{victim:?}, round {round}: a stream or event destroyed after its context's release"
            );
        }
    }
    println!(
        "teardown over the stub: {ROUNDS} rounds for each of 4 victims, no stream or event \
         destroyed after its context's release"
    );
}

/// A program that only launches a graph (`GraphExec::launch` makes no other call of this crate
/// and does not run the queue) sees each stream its host node drops destroyed without another
/// call: the reaper runs the queue when a callback defers to it.
#[test]
fn a_graph_only_loop_destroys_what_its_callbacks_drop() {
    let Some((_lock, stub)) = stub() else { return };
    const LAUNCHES: usize = 100;
    let ctx = Context::primary(0).unwrap();
    ctx.make_current().unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let victims: Vec<Stream> = (0..LAUNCHES).map(|_| Stream::new(&ctx).unwrap()).collect();
    let victims = Mutex::new(victims);
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let graph = Graph::new(&ctx).unwrap();
    graph
        .add_host_node(&[], move || {
            drop(victims.lock().unwrap().pop());
            d.fetch_add(1, SeqCst);
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let destroys = stub.count(COUNT_STREAM_DESTROYS);
    let mut slowest = Duration::ZERO;
    for launch in 1..=LAUNCHES {
        exec.launch(&stream).unwrap();
        assert_eq!(
            dropped.load(SeqCst),
            launch,
            "the stub runs the host node at once"
        );
        // No call of this crate until it is destroyed.
        let start = Instant::now();
        while stub.count(COUNT_STREAM_DESTROYS) - destroys < launch as u64 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "launch {launch}: the stream its host node dropped is not destroyed after 10 s \
                 ({} of {launch} are)",
                stub.count(COUNT_STREAM_DESTROYS) - destroys
            );
            std::thread::yield_now();
        }
        slowest = slowest.max(start.elapsed());
    }
    println!(
        "graph-only loop over the stub: {LAUNCHES} launches, each stream its host node dropped \
         destroyed before the next launch, within {slowest:?} at most, with no other call"
    );
}

/// Records its drop and the thread it ran on.
struct Kept(Arc<Mutex<Vec<Option<String>>>>);

impl Drop for Kept {
    fn drop(&mut self) {
        let name = std::thread::current().name().map(str::to_owned);
        self.0.lock().unwrap().push(name);
    }
}

/// `Graph::keep` and `Stream::keep_in_capture`: the value lives while a graph, clone or
/// executable holds it, and is dropped once after the last, on the reaper thread; a stream that
/// is not capturing refuses, dropping the value at once.
#[test]
fn graphs_keep_any_value_until_their_last_holder_goes() {
    let Some((_lock, _stub)) = stub() else { return };
    let ctx = Context::primary(0).unwrap();
    ctx.make_current().unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let drops = Arc::new(Mutex::new(Vec::new()));
    let dropped = || drops.lock().unwrap().len();

    let graph = Graph::new(&ctx).unwrap();
    graph.keep(Kept(Arc::clone(&drops))).unwrap();
    let (first, second) = (graph.instantiate().unwrap(), graph.instantiate().unwrap());
    drop(graph);
    first.launch(&stream).unwrap();
    drop(first);
    wait_for_drops().unwrap();
    assert_eq!(dropped(), 0, "the second executable still holds the value");
    drop(second);
    wait_for_drops().unwrap();
    assert_eq!(dropped(), 1, "dropped once, after the last holder");

    stream
        .begin_capture(cuda_hostcb_safe::CaptureMode::Global)
        .unwrap();
    stream.keep_in_capture(Kept(Arc::clone(&drops))).unwrap();
    let captured = stream.end_capture().unwrap();
    wait_for_drops().unwrap();
    assert_eq!(dropped(), 1, "the captured graph holds the value");
    drop(captured);
    wait_for_drops().unwrap();
    assert_eq!(dropped(), 2);

    assert!(matches!(
        stream.keep_in_capture(Kept(Arc::clone(&drops))),
        Err(Error::NotCapturing)
    ));
    assert_eq!(dropped(), 3, "refused, and dropped at once");
    let threads = drops.lock().unwrap().clone();
    assert_eq!(
        threads[..2],
        [
            Some(REAPER_THREAD_NAME.to_owned()),
            Some(REAPER_THREAD_NAME.to_owned())
        ],
        "dropped on the reaper thread"
    );
}
