//! The protocol of handle destructions ([`crate::reaper`]): model-checked with loom
//! (`cargo xtask loom`, `tests/loom`), which compiles this file.
//!
//! Every destruction of a handle goes through [`Deferral::destroy`], with what keeps the
//! handle's context alive (its `Context`, a retain of that context) as the `owner`.
//!
//! - **Inside a callback** (no CUDA call is permitted there) the destruction is queued and
//!   marked pending, under the queue's lock, and `destroy` says so, so that the caller wakes a
//!   thread that runs the queue (the reaper). A call from an ordinary thread that sees it pending
//!   (one atomic load: the entry check of every call) runs the queue: it takes it and marks none
//!   pending under that lock, and runs what it took outside it. Every destruction queued runs
//!   exactly once, and one queued before a call's entry check has run when that check returns.
//! - **Outside a callback** it runs at once, after those queued so far ([`Deferral::settle`]).
//!
//! **No destruction runs after the release of its handle's context**, by construction: a
//! context is released by the drop of its last retain, and the owner of a destruction, a retain
//! of that context, is dropped only after the destruction has run, wherever and whenever that
//! is (at once, or from the queue on any thread, however the threads interleave). So the last
//! retain cannot go while a destruction of one of its handles waits or runs, and the release
//! leaves none behind.
//!
//! **Settling.** Queued destructions run under one more lock, `running`, held by the thread
//! that runs them (the reaper, or a call's entry check) until they and their owners' drops are
//! done; a state byte ([`PENDING`], [`BUSY`]) says in one load whether any waits or runs. The
//! drop of every handle (a `Context`, and through `destroy` a stream, graph or executable)
//! settles first: if any waits or runs, it takes `running` and runs the queue. So:
//! - the program's last handle of a context runs what callbacks queued, whose owners give their
//!   retains back, and the release runs there and then, after them;
//! - the owner of a borrowed context ([`Context::borrow_raw`](crate::Context::borrow_raw)),
//!   which this crate never releases, may destroy it once the program's last handle of it is
//!   dropped: no destruction queued before that drop waits, or still runs on another thread.
//!
//! A destruction whose owner's drop drops a handle (the last retain, whose release is a
//! destruction too) is on the thread that holds `running`, and does not take it again
//! (`REAPING`): that thread goes on with the queue.
//!
//! **Other work deferred out of callbacks** goes to the reaper thread ([`crate::reaper`]):
//! closures, dropped there after their call (stream callbacks) or after CUDA has run a user
//! object's destructor (host nodes, captures, an updatable executable's retired closures). Those
//! are ordered by what they own: a closure that owns a handle of this crate holds that handle's
//! retain, so its context is released only after the closure's drop has destroyed the handle,
//! whichever thread that is on. The completion waiter drops the events it was handed on its own
//! thread; each event's `Mark` holds its context's retain. Not ordered here: a closure's raw
//! resources that hold no retain (yours to order), and a borrowed stream's completion, which
//! holds its raw context only: once handed to the waiter and then dropped, its event is
//! destroyed at the waiter's next sweep (1 ms at most), so that context must outlive the
//! future by that much.

use std::cell::Cell;

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU8, Ordering};
use crate::sync::{const_fn, thread_flag};

thread_flag! {
    /// Whether this thread holds `running` (it runs queued destructions).
    REAPING
}

/// A destruction that waits for an ordinary thread, with its owner inside.
pub(crate) type Destruction = Box<dyn FnOnce() + Send>;

/// Destructions queued by callbacks.
pub(crate) struct Deferral {
    queue: Mutex<Vec<Destruction>>,
    /// [`PENDING`] and [`BUSY`], in one byte so that each fast path is one load.
    state: AtomicU8,
    /// Held while queued destructions run, their owners' drops included.
    running: Mutex<()>,
}

/// Destructions are queued (set and cleared under the queue's lock).
const PENDING: u8 = 1;
/// A thread that holds `running` has taken from the queue: set as `PENDING` is cleared, and
/// cleared once the last destruction taken has run, so a thread that sees neither set knows
/// that none waits or runs ([`Deferral::settle`]'s fast path).
const BUSY: u8 = 2;

impl Deferral {
    const_fn! {
        /// Nothing queued.
        pub(crate) fn new() -> Deferral {
            Deferral {
                queue: Mutex::new(Vec::new()),
                state: AtomicU8::new(0),
                running: Mutex::new(()),
            }
        }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Vec<Destruction>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether destructions wait (one atomic load: the entry check of every call).
    #[inline(always)]
    pub(crate) fn pending(&self) -> bool {
        self.state.load(Ordering::Acquire) & PENDING != 0
    }

    /// Whether destructions wait or a thread runs some (one atomic load).
    #[inline(always)]
    pub(crate) fn unsettled(&self) -> bool {
        self.state.load(Ordering::Acquire) != 0
    }

    /// Runs `destruction` and then drops `owner` (what keeps the handle's context alive): now,
    /// after every destruction queued so far and any another thread runs ([`settle`](Self::settle)), or, `inside` a callback, from the queue on an
    /// ordinary thread. Returns whether it was queued (the caller then wakes a thread that runs
    /// the queue).
    pub(crate) fn destroy<O: Send + 'static>(
        &self,
        inside: bool,
        owner: O,
        destruction: impl FnOnce() + Send + 'static,
    ) -> bool {
        let run = move || {
            destruction();
            drop(owner);
        };
        if inside {
            let mut queue = self.lock();
            queue.push(Box::new(run));
            self.state.fetch_or(PENDING, Ordering::Release);
            true
        } else {
            self.settle();
            run();
            false
        }
    }

    /// Runs the destructions queued so far, in order, unless `inside` a callback.
    #[inline]
    pub(crate) fn reap(&self, inside: bool) {
        if self.pending() && !inside {
            self.reap_now();
        }
    }

    /// Runs the queue, as [`settle`](Self::settle) does, once it is known to be pending.
    #[cold]
    #[inline(never)]
    pub(crate) fn reap_now(&self) {
        self.settle_now();
    }

    /// Waits until no other thread runs queued destructions, then runs the queue until it is
    /// empty: takes it and marks none pending, under the queue's lock, and runs what it took
    /// outside that lock, under `running`. On a thread that runs the queue already (a
    /// destruction's owner dropped there) it returns at once: that thread goes on with the
    /// queue. Not inside a callback (the caller checks).
    #[inline(always)]
    pub(crate) fn settle(&self) {
        // One atomic load when nothing waits or runs (every context handle's drop).
        if self.unsettled() {
            self.settle_now();
        }
    }

    /// [`settle`](Self::settle) past its fast path.
    #[cold]
    #[inline(never)]
    pub(crate) fn settle_now(&self) {
        if REAPING.with(Cell::get) {
            return;
        }
        let _running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        REAPING.with(|r| r.set(true));
        // Reset even if a destruction panics, so that this thread can run the queue again.
        struct Done<'a>(&'a AtomicU8);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.fetch_and(!BUSY, Ordering::Release);
                REAPING.with(|r| r.set(false));
            }
        }
        let _done = Done(&self.state);
        loop {
            let taken = {
                let mut queue = self.lock();
                // PENDING changes under the queue's lock alone: clear it and set BUSY at once.
                self.state.store(BUSY, Ordering::Release);
                std::mem::take(&mut *queue)
            };
            if taken.is_empty() {
                return;
            }
            taken.into_iter().for_each(|run| run());
        }
    }

    /// How many destructions wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
