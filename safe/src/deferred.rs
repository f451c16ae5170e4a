//! Handle destructions, deferred out of CUDA callbacks ([`crate::protocol::deferral`] holds the protocol
//! and the argument for its order).
//!
//! Inside a callback no CUDA call is permitted, so a handle dropped there (by a closure's body)
//! is destroyed later: [`destroy`] queues its destruction and wakes the reaper thread
//! ([`crate::reaper`]), which runs the queue before it next parks; every call of this crate from
//! an ordinary thread runs it too, first ([`crate::callback::enter`]; every public call but
//! `GraphExec::launch`, whose fast path is the entry check alone). So a program that makes no
//! other call (one that only replays graphs) still sees its handles destroyed. [`Handle`]
//! carries a raw handle into such a destruction, which may run on another thread.

use crate::callback::in_callback;
use crate::protocol::deferral::Deferral;

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
        crate::reaper::wake();
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
