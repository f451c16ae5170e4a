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
//! What this does not order: destructions of handles that hold no retain (a borrowed context's,
//! whose owner promises it outlives them) and the drops of closures on the reaper thread
//! (a closure that captures a handle holds that handle's retain, so they are ordered too).

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::const_fn;

/// A destruction that waits for an ordinary thread, with its owner inside.
pub(crate) type Destruction = Box<dyn FnOnce() + Send>;

/// Destructions queued by callbacks.
pub(crate) struct Deferral {
    queue: Mutex<Vec<Destruction>>,
    pending: AtomicBool,
}

impl Deferral {
    const_fn! {
        /// Nothing queued.
        pub(crate) fn new() -> Deferral {
            Deferral {
                queue: Mutex::new(Vec::new()),
                pending: AtomicBool::new(false),
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

    /// Takes the queue and marks none pending, under the lock; runs what it took outside it.
    #[cold]
    #[inline(never)]
    pub(crate) fn reap_now(&self) {
        let taken = {
            let mut queue = self.lock();
            self.pending.store(false, Ordering::Release);
            std::mem::take(&mut *queue)
        };
        taken.into_iter().for_each(|run| run());
    }

    /// How many destructions wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
