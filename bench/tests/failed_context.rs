//! The safe layer over the stub driver acting as a failed context (`hostcb_stub_fail_context`,
//! see `stub/cuda_stub.c`): CUDA makes the stream callbacks of one-shot closures with the
//! context's error, so each closure is dropped uncalled, on the reaper thread, exactly once, and
//! `Stream::synchronize` names what happened; a completion future resolves; a host node's closure
//! is dropped on the reaper thread too. No GPU: the stub runs everything at once.
//!
//! The stub is the one `bench/build.rs` built on this machine (`HOSTCB_STUB_DIR`); where it is
//! not (an executable carried to another machine), the test says so and passes.

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use cuda_hostcb_safe::{
    Context, Error, Graph, HostSyncMode, REAPER_THREAD_NAME, Stream, SyncModeMissing,
    wait_for_drops,
};

/// `CUDA_ERROR_LAUNCH_FAILED`, the error a trapped kernel leaves.
const LAUNCH_FAILED: i32 = 719;

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
    let stub = PathBuf::from(env!("HOSTCB_STUB_DIR")).join("libcuda.so.1");
    if !stub.is_file() {
        println!(
            "SKIP: the stub driver is not at {} (built by bench/build.rs)",
            stub.display()
        );
        return;
    }
    // SAFETY: set before any thread of this test process calls CUDA (this is its only test).
    unsafe { std::env::set_var("CUDA_HOSTCB_LIBCUDA", &stub) };

    let ctx = Context::primary(0).unwrap();
    ctx.make_current().unwrap();
    let stream = Stream::new(&ctx).unwrap();
    // SAFETY: the stub this process loaded; its own control function.
    let lib = unsafe { libloading::Library::new(&stub) }.unwrap();
    let fail_context: libloading::Symbol<unsafe extern "C" fn(i32)> =
        unsafe { lib.get(b"hostcb_stub_fail_context\0") }.unwrap();
    let set_driver_version: libloading::Symbol<unsafe extern "C" fn(i32)> =
        unsafe { lib.get(b"hostcb_stub_set_driver_version\0") }.unwrap();
    // A 13.1 driver, which takes sync modes (cuLaunchHostFunc_v2), before anything asks.
    unsafe { set_driver_version(13010) };

    // Healthy: called, then dropped on the reaper thread. Sync-mode closures too, where the
    // headers the safe layer is compiled over (the newest target's) declare them.
    let healthy = Arc::new(Log::default());
    let sync_mode = match stream.launch_with_sync_mode(HostSyncMode::SpinWait, marked(&healthy)) {
        Ok(()) => true,
        Err(Error::SyncModeUnavailable {
            missing: SyncModeMissing::Target { .. },
            ..
        }) => false,
        Err(e) => panic!("launch_with_sync_mode on a 13.1 driver: {e}"),
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
    unsafe { fail_context(LAUNCH_FAILED) };
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
    unsafe { fail_context(0) };
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
