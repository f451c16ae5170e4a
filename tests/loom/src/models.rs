//! One model per protocol. Each runs the protocol's own code on the threads it runs on for
//! real (a callback's, the reaper's, the waiter's, a caller's), with CUDA's part played by a
//! closure, and asserts the protocol's promise after (or during) every interleaving.

use std::ffi::c_void;
use std::task::{Wake, Waker};

use crate::protocol::backlog::Backlog;
use crate::protocol::book::Book;
use crate::protocol::deferral::Deferral;
use crate::protocol::signal::{Check, Signal, Sweeper, Watch};
use crate::protocol::store::{Held, Store};
use crate::slot::Slot;
use crate::sync::Arc;
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::thread;

/// Runs `f` under loom with the preemption bound of `LOOM_MAX_PREEMPTIONS`, 3 if unset, and
/// prints how many executions it explored.
#[cfg(feature = "loom")]
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&runs);
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    println!(
        "loom: {test}: {} executions (preemption bound {})",
        runs.load(std::sync::atomic::Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(0),
    );
}

/// Without loom: a few runs on real threads, a smoke test of the models themselves.
#[cfg(not(feature = "loom"))]
fn model(f: impl Fn() + Sync + Send + 'static) {
    for _ in 0..50 {
        f();
    }
}

/// Leaks `value`, for the protocols that keep `'static` references.
fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

// ---------------------------------------------------------------------------------------------
// The reaper's hand-off and its overflow path.

/// A closure handed to the reaper: counts its drop.
struct Job(Arc<AtomicUsize>);

impl Drop for Job {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a trampoline does with its closure (`Reaper::drop_later`): hand it over, or, with the
/// backlog full, drop it here, counted.
fn drop_later(backlog: &Backlog<Job>, job: Job, reaper: &thread::Thread) {
    if let Err(job) = backlog.offer(job, reaper) {
        backlog.count_overflow();
        drop(job);
    }
}

#[test]
fn reaper_runs_every_job_once_and_a_wait_sees_them_all() {
    model(|| {
        // Room for one: the second hand-over overflows unless the reaper took the first.
        let backlog = Arc::new(Backlog::<Job>::new(1));
        backlog.reserve();
        let dropped = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let reaper = {
            let (backlog, stop) = (Arc::clone(&backlog), Arc::clone(&stop));
            thread::spawn(move || {
                backlog.serve(drop, thread::park, || stop.load(Ordering::Acquire));
            })
        };
        let taker = reaper.thread().clone();
        // A callback on another thread, and one here.
        let callback = {
            let (backlog, dropped, taker) =
                (Arc::clone(&backlog), Arc::clone(&dropped), taker.clone());
            thread::spawn(move || drop_later(&backlog, Job(dropped), &taker))
        };
        drop_later(&backlog, Job(Arc::clone(&dropped)), &taker);
        callback.join().unwrap();
        backlog.wait();
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            2,
            "the wait returned before every job handed over had been dropped"
        );
        assert_eq!(backlog.pending(), 0);
        assert!(backlog.overflowed() <= 1);
        stop.store(true, Ordering::Release);
        taker.unpark();
        reaper.join().unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// Deferred destructions.

#[test]
fn every_deferred_destruction_runs_once_and_none_is_left_behind_a_call() {
    model(|| {
        let deferral: &'static Deferral = leak(Deferral::new());
        let ran = Arc::new(AtomicUsize::new(0));
        let count = |ran: &Arc<AtomicUsize>| {
            let ran = Arc::clone(ran);
            move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }
        };
        // A callback drops two handles; a caller makes a call (its entry check) meanwhile.
        let callback = {
            let (one, two) = (count(&ran), count(&ran));
            thread::spawn(move || {
                assert!(deferral.destroy(true, (), one), "a callback queues");
                assert!(deferral.destroy(true, (), two), "a callback queues");
            })
        };
        let caller = thread::spawn(move || deferral.reap(false));
        callback.join().unwrap();
        caller.join().unwrap();
        // Whatever the caller did not take is still pending, and the next call runs it.
        let left = ran.load(Ordering::SeqCst);
        assert_eq!(
            deferral.pending(),
            left < 2,
            "a destruction is queued but not marked pending (or marked with none queued)"
        );
        deferral.reap(false);
        assert_eq!(
            ran.load(Ordering::SeqCst),
            2,
            "each destruction runs exactly once"
        );
        assert!(!deferral.pending());
    });
}

/// A context as `safe/src/context.rs` keeps it: retains shared by the program's handles and
/// the handles made in it; the drop of the last one releases it, through the deferral (as a
/// destruction of its own, outside any callback: no retain is ever dropped inside one, since a
/// handle dropped there hands its retain to its queued destruction).
struct Retained {
    deferral: &'static Deferral,
    released: Arc<AtomicBool>,
}

impl Drop for Retained {
    fn drop(&mut self) {
        let released = Arc::clone(&self.released);
        self.deferral.destroy(false, (), move || {
            assert!(
                !released.swap(true, Ordering::SeqCst),
                "the context is released once"
            );
        });
    }
}

/// The program's handle of the context: it settles the queue (runs it, and waits for a batch
/// another thread runs) before its retain goes.
struct ContextHandle(Option<Arc<Retained>>);

impl Drop for ContextHandle {
    fn drop(&mut self) {
        if let Some(retain) = self.0.take() {
            retain.deferral.settle();
            drop(retain);
        }
    }
}

/// A stream of the context, dropped by the closure a callback runs: its destruction (queued)
/// records whether the context was already released when it ran.
fn drop_stream(
    retain: Arc<Retained>,
    inside: bool,
    destroyed: &Arc<AtomicUsize>,
    late: &Arc<AtomicUsize>,
) {
    let (deferral, released) = (retain.deferral, Arc::clone(&retain.released));
    let (destroyed, late) = (Arc::clone(destroyed), Arc::clone(late));
    deferral.destroy(inside, retain, move || {
        if released.load(Ordering::SeqCst) {
            late.fetch_add(1, Ordering::SeqCst);
        }
        destroyed.fetch_add(1, Ordering::SeqCst);
    });
}

#[test]
fn no_destruction_runs_after_its_context_is_released_and_the_release_is_not_left_behind() {
    model(|| {
        let deferral: &'static Deferral = leak(Deferral::new());
        let released = Arc::new(AtomicBool::new(false));
        let ctx = ContextHandle(Some(Arc::new(Retained {
            deferral,
            released: Arc::clone(&released),
        })));
        let (destroyed, late) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        // The stream a callback drops, and that callback; the reaper (or any other call) runs
        // the queue meanwhile.
        let stream = Arc::clone(ctx.0.as_ref().unwrap());
        let callback = {
            let (destroyed, late) = (Arc::clone(&destroyed), Arc::clone(&late));
            thread::spawn(move || drop_stream(stream, true, &destroyed, &late))
        };
        let reaper = thread::spawn(move || deferral.reap(false));
        // The program waits for the callback, then drops its last context handle.
        callback.join().unwrap();
        drop(ctx);
        reaper.join().unwrap();
        assert_eq!(
            late.load(Ordering::SeqCst),
            0,
            "a stream was destroyed after its context was released"
        );
        assert_eq!(
            destroyed.load(Ordering::SeqCst),
            1,
            "the stream is destroyed exactly once once the program's last context handle is gone (not left queued)"
        );
        assert!(
            released.load(Ordering::SeqCst),
            "the context's release was left behind (it waits for a later call)"
        );
        assert!(!deferral.pending());
    });
}

/// A borrowed context: the crate never releases it; its owner destroys it once the program's
/// last handle of it is gone. The drop of the last retain still uses it (the real one destroys
/// the context's pooled events).
struct Borrowed {
    deferral: &'static Deferral,
    destroyed: Arc<AtomicBool>,
    late: Arc<AtomicUsize>,
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        if self.destroyed.load(Ordering::SeqCst) {
            self.late.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn once_the_last_handle_of_a_borrowed_context_is_dropped_nothing_of_it_runs() {
    model(|| {
        let deferral: &'static Deferral = leak(Deferral::new());
        let (destroyed, late) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let ctx = Arc::new(Borrowed {
            deferral,
            destroyed: Arc::clone(&destroyed),
            late: Arc::clone(&late),
        });
        // A stream of it, dropped by a callback; the reaper runs the queue meanwhile.
        let callback = {
            let (stream, destroyed, late) =
                (Arc::clone(&ctx), Arc::clone(&destroyed), Arc::clone(&late));
            thread::spawn(move || {
                deferral.destroy(true, stream, move || {
                    if destroyed.load(Ordering::SeqCst) {
                        late.fetch_add(1, Ordering::SeqCst);
                    }
                });
            })
        };
        let reaper = thread::spawn(move || deferral.reap(false));
        // The program waits for the callback, drops its last handle (settling the queue), and
        // the context's owner destroys it.
        callback.join().unwrap();
        deferral.settle();
        drop(ctx);
        destroyed.store(true, Ordering::SeqCst);
        reaper.join().unwrap();
        assert_eq!(
            late.load(Ordering::SeqCst),
            0,
            "a destruction (or the last retain's drop) ran after the owner destroyed the context"
        );
        assert!(!deferral.pending());
    });
}

// ---------------------------------------------------------------------------------------------
// The sticky-error book.

#[test]
fn a_settled_book_holds_every_skip_with_its_status() {
    model(|| {
        let book = Arc::new(Book::default());
        // Two callbacks after a context error: one skipped (status 719), one whose closure ran.
        let callbacks: Vec<_> = [719, 0]
            .into_iter()
            .map(|status| {
                let book = Arc::clone(&book);
                thread::spawn(move || {
                    let body = |book: &Book| {
                        if status != 0 {
                            book.skip(status);
                        }
                    };
                    Book::close(book, body, || {});
                })
            })
            .collect();
        // The failed synchronisation: wait until no callback holds the book, then report.
        let settled = Book::settle(&book, || {
            thread::yield_now();
            true
        });
        let taken = book.take();
        assert!(settled);
        assert_eq!(taken, (1, 719), "a skip was lost or its status not seen");
        for callback in callbacks {
            callback.join().unwrap();
        }
    });
}

// ---------------------------------------------------------------------------------------------
// The completion waiter.

/// A waker that records its wake and unparks the polling thread, if it parks (loom does not
/// let an unpark reach a thread waiting in a `join`).
struct Flag {
    woken: AtomicBool,
    task: Option<thread::Thread>,
}

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if let Some(task) = &self.task {
            task.unpark();
        }
    }
}

fn flag(parks: bool) -> (std::sync::Arc<Flag>, Waker) {
    let flag = std::sync::Arc::new(Flag {
        woken: AtomicBool::new(false),
        task: parks.then(thread::current),
    });
    (std::sync::Arc::clone(&flag), Waker::from(flag))
}

#[test]
fn a_poll_and_a_resolution_lose_no_wake_up() {
    model(|| {
        let shared = Arc::new(Signal::<u32>::default());
        let (flag, waker) = flag(false);
        let waiter = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || shared.resolve(Check::Done))
        };
        let polled = shared.poll(&waker);
        waiter.join().unwrap();
        assert!(
            polled == Check::Done || flag.woken.load(Ordering::SeqCst),
            "the poll saw no outcome and no wake came: a lost wake-up"
        );
        assert_eq!(shared.check(), Check::Done);
    });
}

/// An event: pending for `left` checks, then done; counts its drop.
struct Event {
    left: usize,
    dropped: Arc<AtomicUsize>,
}

impl Watch<u32> for Event {
    fn check(&mut self) -> Check<u32> {
        if self.left == 0 {
            return Check::Done;
        }
        self.left -= 1;
        Check::Pending
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_waiter_resolves_a_handed_over_future_and_forgets_a_dropped_one() {
    model(|| {
        let sweeper = Arc::new(Sweeper::<u32>::new());
        let stop = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (sweeper, stop) = (Arc::clone(&sweeper), Arc::clone(&stop));
            thread::spawn(move || {
                sweeper.run(thread::park, thread::park_timeout, || {
                    stop.load(Ordering::Acquire)
                });
            })
        };
        let waiter_thread = waiter.thread().clone();
        let dropped = Arc::new(AtomicUsize::new(0));
        // A future dropped right after its hand-over.
        let forgotten = Arc::new(Signal::default());
        let event = Event {
            left: usize::MAX,
            dropped: Arc::clone(&dropped),
        };
        sweeper.hand_over(
            Arc::clone(&forgotten),
            Box::new(event),
            Some(&waiter_thread),
        );
        drop(forgotten);
        // A future awaited on this thread: poll, park until woken.
        let (_flag, waker) = flag(true);
        let shared = Arc::new(Signal::default());
        let event = Event {
            left: 1,
            dropped: Arc::clone(&dropped),
        };
        sweeper.hand_over(Arc::clone(&shared), Box::new(event), Some(&waiter_thread));
        while shared.poll(&waker) == Check::Pending {
            thread::park();
        }
        stop.store(true, Ordering::Release);
        waiter_thread.unpark();
        waiter.join().unwrap();
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            2,
            "an event was kept after its future resolved or was dropped"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// The executable-update store.

/// A closure's owner in the store: alive until dropped.
struct Owner(Arc<AtomicBool>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

fn owner() -> (Owner, Arc<AtomicBool>) {
    let alive = Arc::new(AtomicBool::new(true));
    (Owner(Arc::clone(&alive)), alive)
}

/// CUDA calling the closure installed at `generation`: it must be alive; then the store gives
/// up what the call proves unused (dropped here, where the reaper would drop it).
fn call(store: &Store<Owner>, alive: &AtomicBool, generation: u64) {
    assert!(
        alive.load(Ordering::SeqCst),
        "a closure a launch calls was given up"
    );
    store.called(generation, drop);
}

#[test]
fn no_closure_is_given_up_while_a_launch_may_call_it() {
    model(|| {
        const A: usize = 0xa;
        const B: usize = 0xb;
        let store = Arc::new(Store::<Owner>::new());
        // Node A set at generation 1, node B at 2, a launch; A set again at 3 (A1 retired: the
        // launch may call it), and a second launch, made at generation 3.
        let (a1, a1_alive) = owner();
        let (b2, b2_alive) = owner();
        let (a3, a3_alive) = owner();
        assert!(store.install(A, Held::new(1, a1), 0).is_none());
        assert!(store.install(B, Held::new(2, b2), 0).is_none());
        assert!(store.install(A, Held::new(3, a3), 2).is_none());
        let launched_at = 3;
        // CUDA runs the second launch: A3, then B2; each call reports its own generation.
        let launch = {
            let store = Arc::clone(&store);
            let (a3_alive, b2_alive) = (Arc::clone(&a3_alive), Arc::clone(&b2_alive));
            thread::spawn(move || {
                call(&store, &a3_alive, 3);
                call(&store, &b2_alive, 2);
            })
        };
        // Meanwhile B is set again (generation 4): the launch may still call B2, so it is
        // retired, not given up.
        let (b4, b4_alive) = owner();
        assert!(store.install(B, Held::new(4, b4), launched_at).is_none());
        launch.join().unwrap();
        // A launch made after generation 4 runs B4: every replaced closure is given up now.
        call(&store, &b4_alive, 4);
        assert!(!a1_alive.load(Ordering::SeqCst), "A1 was kept");
        assert!(!b2_alive.load(Ordering::SeqCst), "B2 was kept");
        assert_eq!(store.held(), 2);
    });
}

// ---------------------------------------------------------------------------------------------
// The first-call stubs on one entry point.

// Addresses that stand for the stub and the library's function (never called).
const STUB: *const c_void = std::ptr::without_provenance(0x57);
const FUNCTION: *const c_void = std::ptr::without_provenance(0xf0);

/// A call through the entry point: its slot's address; the stub resolves (loads the library,
/// publishes the function) and forwards. The call must reach the library's function and see the
/// library loaded.
fn call_entry(slot: &Slot, library: &AtomicUsize) {
    let mut address = slot.address();
    if address == STUB {
        // The stub (`first.rs`): resolve through the slot, as `DriverMeta::address` does.
        address = slot
            .get_or(|| {
                library.store(1, Ordering::Relaxed);
                slot.publish(FUNCTION);
                Ok::<_, ()>(FUNCTION)
            })
            .unwrap();
    }
    assert_eq!(address, FUNCTION);
    assert_eq!(
        library.load(Ordering::Relaxed),
        1,
        "the function's address was seen before the library it belongs to"
    );
}

#[test]
fn first_calls_racing_on_one_entry_point_reach_the_loaded_function() {
    model(|| {
        let slot = Arc::new(Slot::new(STUB));
        let library = Arc::new(AtomicUsize::new(0));
        let others: Vec<_> = (0..2)
            .map(|_| {
                let (slot, library) = (Arc::clone(&slot), Arc::clone(&library));
                thread::spawn(move || call_entry(&slot, &library))
            })
            .collect();
        call_entry(&slot, &library);
        for other in others {
            other.join().unwrap();
        }
        assert_eq!(slot.resolved(), Some(FUNCTION));
    });
}
