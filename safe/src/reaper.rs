//! The reaper: a thread of this crate that drops closures (and what they capture) after CUDA is
//! done with them, so that no closure is dropped on one of CUDA's threads.
//!
//! CUDA calls host functions, stream callbacks and user-object destructors on threads of its
//! own, where every CUDA call fails with `CUDA_ERROR_NOT_PERMITTED`. A closure that owns device
//! memory (a buffer whose `Drop` calls `cuMemFree`) would leak it there, silently, and an
//! error-keeping library (cudarc) would then fail its next call on another thread. So the
//! trampolines never drop a closure themselves: they hand it here ([`drop_later`]), and the
//! reaper thread, an ordinary program thread, drops it.
//!
//! - The backlog holds at most [`BACKLOG`] closures waiting to be dropped. Handing one over
//!   never blocks CUDA's thread (a blocked callback could stall the device work that a `Drop`
//!   on the reaper waits for, e.g. `cuMemFree`, which synchronises): when the backlog is full,
//!   the closure is dropped where it is, on CUDA's thread, as it was before this layer had a
//!   reaper, and counted ([`overflowed_drops`]). The same happens if the thread cannot be
//!   started.
//! - The thread starts on first use and runs for the life of the process. It has no current
//!   CUDA context: a `Drop` that calls CUDA makes its context current itself (as cudarc's types
//!   do). Closures still waiting when the process exits are not dropped.
//! - It also runs the handle destructions that callbacks deferred ([`destroy`]), when a
//!   deferral wakes it and before each park, so that they do not wait for the program's next
//!   call. Each carries its context's retain, so its order against the context's release holds
//!   on this thread as on any other ([`crate::protocol::deferral`]).
//!
//! # Handle destructions
//!
//! Inside a callback no CUDA call is permitted, so a handle dropped there (by a closure's body)
//! is destroyed later: [`destroy`] queues its destruction and wakes the reaper thread, which runs
//! the queue before it next parks; every call of this crate from an ordinary thread runs it too,
//! first ([`crate::callback::enter`]; every public call but `GraphExec::launch`, whose fast path
//! is the entry check alone). So a program that makes no other call (one that only replays
//! graphs) still sees its handles destroyed. [`Handle`] carries a raw handle into such a
//! destruction, which may run on another thread.
//! - [`wait_for_drops`] waits until every closure handed over so far is dropped;
//!   [`pending_drops`] counts those not yet dropped. Neither sees closures that CUDA still holds
//!   (pending launches, graphs and executables not yet destroyed).
//! - A panic in a `Drop` is caught and reported through the panic hook
//!   ([`PanicStage::Drop`](crate::PanicStage::Drop)); the reaper goes on.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::thread::{self, Thread};

use crate::Error;
use crate::inside::in_callback;
use crate::panic::{PanicStage, report};
use crate::protocol::backlog::Backlog;
use crate::protocol::deferral::Deferral;

/// How many closures may wait for the reaper at once; see the module documentation for what
/// happens beyond.
pub const BACKLOG: usize = 4096;

/// The name of the reaper thread, as [`std::thread::Thread::name`] reports it on that thread.
pub const REAPER_THREAD_NAME: &str = "cuda-hostcb-reaper";

/// Drops what `data` points to (and frees its allocation); called once.
pub(crate) type DropFn = unsafe fn(*mut c_void);

/// One closure to drop.
struct Job {
    data: *mut c_void,
    drop: DropFn,
}

// SAFETY: every job is a closure (or a box of one) whose type is `Send`, handed over once by the
// trampoline that owned it; `drop_later`'s contract says so.
unsafe impl Send for Job {}

impl Job {
    /// Drops the job's closure, reporting a panic instead of raising it.
    fn run(self) {
        let Job { data, drop } = self;
        // SAFETY: by `drop_later`'s contract, `drop` drops `data` once, here.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| unsafe { drop(data) })) {
            report(PanicStage::Drop, payload);
        }
    }
}

/// A reaper: its backlog and its thread (one per process, [`REAPER`]; tests make their own).
pub(crate) struct Reaper {
    /// The hand-off (model-checked on its own: [`crate::protocol::backlog`]).
    backlog: Backlog<Job>,
    thread: OnceLock<Option<Thread>>,
    name: &'static str,
}

/// The process's reaper.
static REAPER: Reaper = Reaper::new(BACKLOG, REAPER_THREAD_NAME);

thread_local! {
    /// Whether this thread is a reaper thread.
    static ON_REAPER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Reaper {
    pub(crate) const fn new(capacity: usize, name: &'static str) -> Reaper {
        Reaper {
            backlog: Backlog::new(capacity),
            thread: OnceLock::new(),
            name,
        }
    }

    /// The reaper thread, started on first use (`None`: it could not be started).
    #[inline]
    fn thread(&'static self) -> Option<&'static Thread> {
        self.thread.get_or_init(|| self.start()).as_ref()
    }

    #[cold]
    #[inline(never)]
    fn start(&'static self) -> Option<Thread> {
        self.backlog.reserve();
        thread::Builder::new()
            .name(self.name.to_owned())
            .spawn(move || self.run())
            .ok()
            .map(|handle| handle.thread().clone())
    }

    /// Hands `data` over to be dropped by `drop` on the reaper thread (or here, counted, when
    /// the backlog is full or the thread could not be started).
    ///
    /// # Safety
    /// `drop(data)` drops a value of a `Send` type once; nothing else uses `data` afterwards.
    #[inline]
    pub(crate) unsafe fn drop_later(&'static self, data: *mut c_void, drop: DropFn) {
        let job = Job { data, drop };
        let Some(thread) = self.thread() else {
            return self.overflow(job);
        };
        if let Err(job) = self.backlog.offer(job, thread) {
            self.overflow(job);
        }
    }

    /// Drops `job` on this thread, counted.
    #[cold]
    #[inline(never)]
    fn overflow(&self, job: Job) {
        self.backlog.count_overflow();
        job.run();
    }

    /// The reaper thread's loop: take the whole backlog, drop it, and when there is none run
    /// the handle destructions that callbacks deferred ([`crate::reaper`]) and park. A
    /// deferral unparks the thread after queueing ([`wake`]), so none waits for a park that
    /// does not come.
    fn run(&self) {
        ON_REAPER.with(|on| on.set(true));
        let park = || {
            reap();
            thread::park();
        };
        self.backlog.serve(Job::run, park, || false);
    }

    /// Wakes the reaper thread (started if need be), to run the deferred destructions.
    fn wake(&'static self) {
        if let Some(thread) = self.thread() {
            thread.unpark();
        }
    }

    /// Closures handed over and not yet dropped.
    pub(crate) fn pending(&self) -> usize {
        self.backlog.pending()
    }

    /// Waits until every closure handed over so far has been dropped.
    pub(crate) fn wait(&self) {
        self.backlog.wait();
    }

    pub(crate) fn overflowed(&self) -> u64 {
        self.backlog.overflowed()
    }
}

/// Hands a closure to the process's reaper; see [`Reaper::drop_later`].
///
/// # Safety
/// As [`Reaper::drop_later`].
#[inline]
pub(crate) unsafe fn drop_later(data: *mut c_void, drop: DropFn) {
    // SAFETY: the caller's contract.
    unsafe { REAPER.drop_later(data, drop) }
}

/// Wakes the process's reaper, which runs the handle destructions deferred by callbacks before
/// it parks again.
pub(crate) fn wake() {
    REAPER.wake();
}

/// Disposes of a box of a `T` that CUDA is done with: hands it to the reaper when dropping a
/// `T` runs code (a `Drop` somewhere in it), else frees the memory here (freeing memory is no
/// CUDA call; nothing of the closure runs).
///
/// # Safety
/// As [`drop_later`]: `drop(data)` drops the `T` behind `data` and frees its memory, once.
#[inline(always)]
pub(crate) unsafe fn release<T: Send + 'static>(data: *mut c_void, drop: DropFn) {
    if std::mem::needs_drop::<T>() {
        // SAFETY: the caller's contract.
        unsafe { drop_later(data, drop) }
    } else {
        // SAFETY: the caller's contract; `T` has no drop code, so this only frees the box.
        unsafe { drop(data) }
    }
}

/// Hands a boxed value to the process's reaper.
pub(crate) fn drop_boxed<T: Send + 'static>(value: Box<T>) {
    unsafe fn drop_box<T>(data: *mut c_void) {
        // SAFETY: `data` is the box made below, dropped once.
        drop(unsafe { Box::from_raw(data.cast::<T>()) });
    }
    // SAFETY: the box's value is `Send` and dropped once by `drop_box`.
    unsafe { drop_later(Box::into_raw(value).cast(), drop_box::<T>) }
}

/// Waits until every closure that CUDA is done with so far has been dropped by the reaper
/// thread: closures whose call ran or was skipped, and those of graphs and executables whose
/// user objects CUDA has destroyed.
///
/// It does not wait for CUDA: synchronise the stream first (and, for the closures of a graph,
/// destroy the graph and its executables; CUDA runs their destructors asynchronously, so poll
/// [`pending_drops`] or your own counts after that). Refused inside a callback
/// ([`Error::InCallback`]) and inside a `Drop` that the reaper runs
/// ([`Error::OnReaperThread`]), where it could only wait for itself. Do not hold a lock that a
/// closure's `Drop` takes while waiting.
pub fn wait_for_drops() -> Result<(), Error> {
    if in_callback() {
        return Err(Error::InCallback {
            operation: "wait_for_drops",
        });
    }
    if ON_REAPER.with(|on| on.get()) {
        return Err(Error::OnReaperThread {
            operation: "wait_for_drops",
        });
    }
    REAPER.wait();
    Ok(())
}

/// How many closures wait for the reaper thread, or are being dropped by it now.
pub fn pending_drops() -> usize {
    REAPER.pending()
}

/// How many closures were dropped on the thread that handed them over (CUDA's), because the
/// reaper's backlog of [`BACKLOG`] was full or its thread could not be started.
pub fn overflowed_drops() -> u64 {
    REAPER.overflowed()
}

// ---- handle destructions ------------------------------------------------------------------

/// Runs the deferred destructions if any wait; the second half of [`crate::callback::enter`]
/// (the caller has checked that the thread is not in a callback). Inlined: one atomic load.
#[inline(always)]
pub(crate) fn reap_pending() {
    if DEFERRED.pending() {
        DEFERRED.reap_now();
    }
}

static DEFERRED: Deferral = Deferral::new();

/// Runs `destroy` (which calls CUDA) and then drops `owner`, the retain of the handle's context
/// (`Option<Context>`, or `()` for a handle that holds none): now, after the destructions
/// deferred so far, or, inside a callback where CUDA calls are not permitted, on the reaper
/// thread or the next call of this crate from an ordinary thread, whichever comes first. The
/// context is released only once `owner` is dropped, so never before `destroy` has run.
pub(crate) fn destroy<O: Send + 'static>(owner: O, destroy: impl FnOnce() + Send + 'static) {
    if DEFERRED.destroy(in_callback(), owner, destroy) {
        wake();
    }
}

/// Runs the deferred destructions, in the order they were deferred (outside callbacks only).
pub(crate) fn reap() {
    DEFERRED.reap(in_callback());
}

/// Waits until no other thread runs deferred destructions, then runs those that wait (outside
/// callbacks only): the drop of a program's context handle ([`crate::protocol::deferral`]).
#[inline(always)]
pub(crate) fn settle() {
    // The atomic load first: it is all a drop pays when nothing waits or runs.
    if DEFERRED.unsettled() && !in_callback() {
        DEFERRED.settle_now();
    }
}

/// How many destructions wait for an ordinary thread.
#[cfg(test)]
pub(crate) fn deferred() -> usize {
    DEFERRED.len()
}

/// A raw CUDA handle type (a context, stream, event, graph or executable pointer of one target's
/// bindings, or a collection of them) that CUDA lets any thread destroy.
///
/// # Safety
///
/// Implement it only for CUDA's opaque handle pointers (each target's `CUstream`, `CUgraph`, ...),
/// which carry no thread affinity, and for owned collections of such handles: [`Handle`] sends
/// it to whichever thread runs the destruction.
pub(crate) unsafe trait CudaHandle {}

// SAFETY: a vector owns its handles; sending it sends each of them.
unsafe impl<T: CudaHandle> CudaHandle for Vec<T> {}

/// A CUDA handle carried into a deferred destruction, which may run on another thread.
pub(crate) struct Handle<T: CudaHandle>(T);

// SAFETY: `T` is a CUDA handle type (see `CudaHandle`), which CUDA lets any thread destroy; a
// `Handle` is only ever moved into the one destruction of its handle.
unsafe impl<T: CudaHandle> Send for Handle<T> {}

impl<T: CudaHandle> Handle<T> {
    pub(crate) fn new(raw: T) -> Handle<T> {
        Handle(raw)
    }

    /// The handle (a method, so that a closure captures the whole `Handle`, not its field).
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier, Mutex};

    /// Records the thread it is dropped on.
    struct Where(Arc<Mutex<Vec<Option<String>>>>);

    impl Drop for Where {
        fn drop(&mut self) {
            let name = thread::current().name().map(str::to_owned);
            self.0.lock().unwrap().push(name);
        }
    }

    unsafe fn drop_where(data: *mut c_void) {
        drop(unsafe { Box::from_raw(data.cast::<Where>()) });
    }

    fn leak(capacity: usize, name: &'static str) -> &'static Reaper {
        Box::leak(Box::new(Reaper::new(capacity, name)))
    }

    #[test]
    fn closures_are_dropped_on_the_reaper_thread_and_waited_for() {
        let reaper = leak(16, "test-reaper-a");
        let seen = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..10 {
            let data = Box::into_raw(Box::new(Where(Arc::clone(&seen))));
            unsafe { reaper.drop_later(data.cast(), drop_where) };
            reaper.wait();
        }
        for _ in 0..10 {
            let data = Box::into_raw(Box::new(Where(Arc::clone(&seen))));
            unsafe { reaper.drop_later(data.cast(), drop_where) };
        }
        reaper.wait();
        assert_eq!(reaper.pending(), 0);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen, vec![Some("test-reaper-a".to_owned()); 20]);
        assert_eq!(reaper.overflowed(), 0);
    }

    #[test]
    fn a_full_backlog_drops_in_place_without_blocking() {
        let reaper = leak(4, "test-reaper-b");
        // The first job holds the reaper until the test lets it go.
        let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        struct Hold(Arc<Barrier>, Arc<Barrier>);
        impl Drop for Hold {
            fn drop(&mut self) {
                self.0.wait();
                self.1.wait();
            }
        }
        unsafe fn drop_hold(data: *mut c_void) {
            drop(unsafe { Box::from_raw(data.cast::<Hold>()) });
        }
        let hold = Box::into_raw(Box::new(Hold(Arc::clone(&entered), Arc::clone(&release))));
        unsafe { reaper.drop_later(hold.cast(), drop_hold) };
        entered.wait();
        assert_eq!(reaper.pending(), 1, "the held job is being dropped");
        let seen = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..10 {
            let data = Box::into_raw(Box::new(Where(Arc::clone(&seen))));
            unsafe { reaper.drop_later(data.cast(), drop_where) };
        }
        // 4 wait; 6 were dropped here, on this (the handing-over) thread.
        assert_eq!(reaper.overflowed(), 6);
        assert_eq!(reaper.pending(), 5);
        let here = thread::current().name().map(str::to_owned);
        assert_eq!(seen.lock().unwrap().clone(), vec![here; 6]);
        release.wait();
        reaper.wait();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 10, "every closure dropped once");
        let on_reaper = seen
            .iter()
            .filter(|n| n.as_deref() == Some("test-reaper-b"))
            .count();
        assert_eq!(on_reaper, 4);
    }

    #[test]
    fn a_panicking_drop_is_reported_and_the_reaper_goes_on() {
        let _guard = crate::panic::tests::HOOK_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let seen = crate::panic::tests::recording_hook();
        let reaper = leak(8, "test-reaper-c");
        struct Loud;
        impl Drop for Loud {
            fn drop(&mut self) {
                panic!("loud drop");
            }
        }
        unsafe fn drop_loud(data: *mut c_void) {
            drop(unsafe { Box::from_raw(data.cast::<Loud>()) });
        }
        unsafe { reaper.drop_later(Box::into_raw(Box::new(Loud)).cast(), drop_loud) };
        let count = Arc::new(AtomicUsize::new(0));
        struct Count(Arc<AtomicUsize>);
        impl Drop for Count {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        unsafe fn drop_count(data: *mut c_void) {
            drop(unsafe { Box::from_raw(data.cast::<Count>()) });
        }
        let data = Box::into_raw(Box::new(Count(Arc::clone(&count))));
        unsafe { reaper.drop_later(data.cast(), drop_count) };
        reaper.wait();
        crate::panic::take_panic_hook();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(
            seen.lock().unwrap().clone(),
            vec![(PanicStage::Drop, Some("loud drop".to_owned()))]
        );
    }

    #[test]
    fn waiting_is_refused_inside_a_callback() {
        let _inside = crate::inside::Inside::enter();
        assert!(matches!(
            wait_for_drops(),
            Err(Error::InCallback {
                operation: "wait_for_drops"
            })
        ));
    }
}
