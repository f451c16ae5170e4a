//! Handle destructions deferred out of CUDA callbacks.
//!
//! Inside a callback no CUDA call is permitted, so a handle dropped there (by a closure's body)
//! is destroyed later: [`destroy`] queues its destruction, and the next call of this crate from an
//! ordinary thread runs the queue ([`crate::callback::enter`]; every public call but
//! `GraphExec::launch`, whose fast path is the entry check alone). [`Handle`]
//! carries a raw handle into such a destruction, which may run on another thread.

use crate::callback::in_callback;
use crate::deferral::Deferral;

/// Runs the deferred destructions if any wait; the second half of [`crate::callback::enter`]
/// (the caller has checked that the thread is not in a callback). Inlined: one atomic load.
#[inline(always)]
pub(crate) fn reap_pending() {
    if DEFERRED.pending() {
        reap_now();
    }
}

/// A destruction that had to wait until it could call CUDA.
type Deferred = Box<dyn FnOnce() + Send>;

static DEFERRED: Deferral<Deferred> = Deferral::new();

/// Runs `destroy` (which calls CUDA) now, or, inside a callback where CUDA calls are not
/// permitted, on the next call of this crate from an ordinary thread.
pub(crate) fn destroy(destroy: impl FnOnce() + Send + 'static) {
    if in_callback() {
        DEFERRED.defer(Box::new(destroy));
    } else {
        destroy();
        reap();
    }
}

/// Runs the deferred destructions, in the order they were deferred (outside callbacks only).
pub(crate) fn reap() {
    if !DEFERRED.pending() || in_callback() {
        return;
    }
    reap_now();
}

/// [`reap`] once it is known that destructions wait and the thread is not in a callback.
#[cold]
#[inline(never)]
fn reap_now() {
    DEFERRED.reap(|destroy| destroy());
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
