//! The protocol of deferred destructions ([`crate::deferred`]): model-checked with loom
//! (`cargo xtask loom`, `tests/loom`), which compiles this file.
//!
//! A callback queues a destruction and marks it pending, under one lock; a call from an
//! ordinary thread that sees it pending (one atomic load, the entry check of every call) takes
//! the queue and marks none pending, under the same lock, and runs what it took outside it. So
//! every destruction deferred runs exactly once, and one deferred before a call's entry check
//! has run when that check returns.

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::const_fn;

/// Destructions deferred by callbacks.
pub(crate) struct Deferral<D> {
    queue: Mutex<Vec<D>>,
    pending: AtomicBool,
}

impl<D> Deferral<D> {
    const_fn! {
        /// Nothing deferred.
        pub(crate) fn new() -> Deferral<D> {
            Deferral {
                queue: Mutex::new(Vec::new()),
                pending: AtomicBool::new(false),
            }
        }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Vec<D>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether destructions wait (one atomic load: the entry check of every call).
    #[inline(always)]
    pub(crate) fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Queues `destruction` and marks it pending, under the lock.
    pub(crate) fn defer(&self, destruction: D) {
        let mut queue = self.lock();
        queue.push(destruction);
        self.pending.store(true, Ordering::Release);
    }

    /// Takes the destructions deferred so far, in order, and marks none pending; the caller runs
    /// them (outside the lock).
    pub(crate) fn take(&self) -> Vec<D> {
        let mut queue = self.lock();
        self.pending.store(false, Ordering::Release);
        std::mem::take(&mut *queue)
    }

    /// Runs `run` on each destruction deferred so far, if any is pending.
    #[inline]
    pub(crate) fn reap(&self, run: impl FnMut(D)) {
        if self.pending() {
            self.take().into_iter().for_each(run);
        }
    }

    /// How many destructions wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
