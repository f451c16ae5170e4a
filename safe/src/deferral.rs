//! The protocol of deferred destructions and the gates that announce them ([`crate::deferred`]):
//! model-checked with loom (`cargo xtask loom`, `tests/loom`), which compiles this file.
//!
//! A callback queues a destruction, marks it pending and closes every gate, all under one lock;
//! a gate is opened again only under that lock and only while nothing is pending. So once a
//! destruction is deferred, every gate stays closed until the destructions have been taken, and
//! a call through a gate that finds it open runs after every destruction deferred before the
//! gate was opened.

use std::ffi::c_void;
use std::ptr;

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use crate::sync::const_fn;

/// A gate's state: the function to call (the open one, or `closed`) and its link in the list of
/// every gate opened so far.
pub(crate) struct GateCore {
    /// The function to call: the open one or `closed`.
    current: AtomicPtr<c_void>,
    closed: *mut c_void,
    /// The next gate in the list; written under the deferral's lock.
    next: AtomicPtr<GateCore>,
    listed: AtomicBool,
}

// SAFETY: a gate holds addresses of functions (of a library that is never unloaded, or of this
// crate), usable from any thread, and atomics.
unsafe impl Sync for GateCore {}

impl GateCore {
    const_fn! {
        /// A closed gate whose closed function is at `closed`.
        pub(crate) fn new(closed: *mut c_void) -> GateCore {
            GateCore {
                current: AtomicPtr::new(closed),
                closed,
                next: AtomicPtr::new(ptr::null_mut()),
                listed: AtomicBool::new(false),
            }
        }
    }

    /// The function to call: the open one, or the closed one.
    #[inline(always)]
    pub(crate) fn current(&self) -> *mut c_void {
        self.current.load(Ordering::Acquire)
    }
}

/// Destructions deferred by callbacks, and the gates they close.
pub(crate) struct Deferral<D> {
    queue: Mutex<Vec<D>>,
    pending: AtomicBool,
    /// Every gate that has been opened, linked through [`GateCore::next`]; written under
    /// `queue`'s lock.
    gates: AtomicPtr<GateCore>,
}

impl<D> Deferral<D> {
    const_fn! {
        /// Nothing deferred, no gate listed.
        pub(crate) fn new() -> Deferral<D> {
            Deferral {
                queue: Mutex::new(Vec::new()),
                pending: AtomicBool::new(false),
                gates: AtomicPtr::new(ptr::null_mut()),
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

    /// Queues `destruction`, marks it pending and closes every gate, under the lock.
    pub(crate) fn defer(&self, destruction: D) {
        let mut queue = self.lock();
        queue.push(destruction);
        self.pending.store(true, Ordering::Release);
        let mut gate = self.gates.load(Ordering::Relaxed);
        while !gate.is_null() {
            // SAFETY: the list holds only `'static` gates.
            let core = unsafe { &*gate };
            core.current.store(core.closed, Ordering::Release);
            gate = core.next.load(Ordering::Relaxed);
        }
    }

    /// Takes the destructions deferred so far, in order, and marks none pending; the caller runs
    /// them (outside the lock). Gates stay closed until opened again.
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

    /// Opens `gate` with the function at `open`, unless a destruction is pending (then the gate
    /// stays closed, and the next call through it takes the closed path again). Lists the gate
    /// the first time, so that a deferral closes it.
    pub(crate) fn open(&self, gate: &'static GateCore, open: *mut c_void) {
        let _queue = self.lock();
        if self.pending.load(Ordering::Acquire) {
            return;
        }
        if !gate.listed.load(Ordering::Relaxed) {
            gate.next
                .store(self.gates.load(Ordering::Relaxed), Ordering::Relaxed);
            self.gates
                .store(ptr::from_ref(gate).cast_mut(), Ordering::Relaxed);
            gate.listed.store(true, Ordering::Relaxed);
        }
        gate.current.store(open, Ordering::Release);
    }

    /// How many destructions wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Runs `check` under the lock if no destruction waits (nothing can close a gate meanwhile).
    #[cfg(test)]
    pub(crate) fn when_none_pending(&self, check: impl FnOnce()) {
        let _queue = self.lock();
        if !self.pending.load(Ordering::SeqCst) {
            check();
        }
    }
}
