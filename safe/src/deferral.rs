//! The protocol of handle destructions ([`crate::deferred`]): model-checked with loom
//! (`cargo xtask loom`, `tests/loom`), which compiles this file.
//!
//! Every destruction of a handle goes through [`Deferral::destroy`], with what the handle's
//! context needs to stay alive (its `Context`, the retain of that context) as the `owner`.
//!
//! - **Inside a callback** (no CUDA call is permitted there) the destruction is queued and
//!   marked pending, under one lock, and `destroy` says so, so that the caller wakes a thread
//!   that runs the queue (the reaper). Any call from an ordinary thread that sees it pending (one
//!   atomic load) takes the queue and marks none pending, under the same lock, and runs what it
//!   took outside the lock: every destruction queued runs exactly once, and one queued before a
//!   call's entry check has run when that check returns.
//! - **Outside a callback** it runs at once, after the destructions queued so far.
//!
//! **No destruction runs after the release of its handle's context**, by construction: a
//! context is released by the drop of its last retain, and the owner of a destruction, that
//! context's retain, is dropped only after the destruction has run, wherever and whenever that
//! is (at once, or from the queue on any thread, however the threads interleave). So the last
//! retain cannot go while a destruction of one of its handles waits in the queue or runs, and
//! the release leaves none behind. The order of the queue makes the common case prompt: a
//! program's last context handle runs the queue first ([`Deferral::reap`]), so the destructions
//! a callback queued give their retains back and the release runs on that thread, at once.
//!
//!
//! A borrowed context ([`Context::borrow_raw`](crate::Context::borrow_raw)) is not released by
//! this crate but destroyed by its owner once the program's last handle of it is gone. So the
//! destructions run under one more lock, `running`, held by whichever thread runs queued ones
//! (the reaper, or a call's entry check) until they and their owners' drops are done, and the
//! drop of a program's context handle takes it ([`Deferral::settle`]): when that drop returns,
//! no destruction queued before it waits or is still running on another thread. A destruction
//! that drops a context handle itself (its owner, the last retain) is on the thread that holds
//! `running` already, and does not take it again (`REAPING`).
//!
//! Other work deferred out of callbacks goes to the reaper thread ([`crate::reaper`]): closures,
//! dropped there after their call (stream callbacks) or after CUDA has run a user object's
//! destructor (host nodes, captures, an updatable executable's retired closures). Those are
//! ordered by what they own: a closure that owns a handle of this crate holds that handle's
//! retain, so its context is released only after the closure's drop has destroyed the handle,
//! whichever thread that is on. The completion waiter drops the events it was handed on its
//! thread; each event's `Mark` holds its context's retain (a borrowed stream's completion holds
//! the raw context only, whose owner must keep it alive until the waiter has dropped it, which
//! it does within a sweep, 1 ms at most, of the future's drop).

use std::cell::Cell;

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicBool, Ordering};
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
    pending: AtomicBool,
    /// Held while queued destructions run, their owners' drops included.
    running: Mutex<()>,
}

impl Deferral {
    const_fn! {
        /// Nothing queued.
        pub(crate) fn new() -> Deferral {
            Deferral {
                queue: Mutex::new(Vec::new()),
                pending: AtomicBool::new(false),
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
        self.pending.load(Ordering::Acquire)
    }

    /// Runs `destruction` and then drops `owner` (what keeps the handle's context alive): now,
    /// after every destruction queued so far, or, `inside` a callback, from the queue on an
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
            self.pending.store(true, Ordering::Release);
            true
        } else {
            self.reap(false);
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
        self.settle();
    }

    /// Waits until no other thread runs queued destructions, then runs the queue until it is
    /// empty: takes it and marks none pending, under the queue's lock, and runs what it took
    /// outside that lock, under `running`. On a thread that runs the queue already (a
    /// destruction's owner dropped there) it returns at once: that thread goes on with the
    /// queue. Not inside a callback (the caller checks).
    pub(crate) fn settle(&self) {
        if REAPING.with(Cell::get) {
            return;
        }
        let _running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        REAPING.with(|r| r.set(true));
        // Reset even if a destruction panics, so that this thread can run the queue again.
        struct Done;
        impl Drop for Done {
            fn drop(&mut self) {
                REAPING.with(|r| r.set(false));
            }
        }
        let _done = Done;
        loop {
            let taken = {
                let mut queue = self.lock();
                self.pending.store(false, Ordering::Release);
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
