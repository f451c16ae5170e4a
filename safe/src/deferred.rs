//! Handle destructions deferred out of CUDA callbacks, and the gates that announce them.
//!
//! Inside a callback no CUDA call is permitted, so a handle dropped there (by a closure's body)
//! is destroyed later: [`destroy`] queues its destruction, and the next call of this crate from an
//! ordinary thread runs the queue ([`crate::callback::enter`], or a closed [`Gate`]). [`Handle`]
//! carries a raw handle into such a destruction, which may run on another thread.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;

use crate::callback::in_callback;
use crate::deferral::{Deferral, GateCore};

/// Runs the deferred destructions if any wait; the second half of [`crate::callback::enter`]
/// (the caller has checked that the thread is not in a callback). Inlined: one atomic load.
#[inline(always)]
pub(crate) fn reap_pending() {
    if DEFERRED.pending() {
        reap_now();
    }
}

/// A fast path's driver function, kept where the safe layer's entry checks can see it: the
/// resolved function while no deferred destruction waits, otherwise the *closed* function of the
/// same type, which runs the deferred destructions, opens the gate again and makes the call. So
/// one load stands for the pending-destruction check of [`enter`] and the loader's resolution
/// test, and the call through it is the fast path's last act (the thread-local callback check
/// stays, before it).
///
/// Deferring a destruction ([`destroy`] inside a callback) closes every gate, under the lock
/// that [`Gate::open`] opens them under, so a call after that runs the deferred destructions
/// first, as [`crate::callback::enter`] does (the protocol: [`crate::deferral`]). A gate is only
/// called through by a caller that has resolved the open function before (the closed function
/// needs it).
pub(crate) struct Gate<F> {
    core: GateCore,
    signature: PhantomData<F>,
}

// SAFETY: a gate holds addresses of functions (of a library that is never unloaded, or of this
// crate), usable from any thread; `F` is only a marker of their type.
unsafe impl<F> Sync for Gate<F> {}

/// An `F` (a function pointer) as an address, and back.
union Address<F: Copy> {
    function: F,
    address: *mut c_void,
}

impl<F: Copy> Gate<F> {
    /// A closed gate whose closed function is `closed`.
    pub(crate) const fn new(closed: F) -> Gate<F> {
        const {
            assert!(size_of::<F>() == size_of::<*mut c_void>());
        }
        // SAFETY: `F` is a function pointer, of the size of an address (asserted above).
        let closed = unsafe { Address { function: closed }.address };
        Gate {
            core: GateCore::new(closed),
            signature: PhantomData,
        }
    }

    /// The function to call: the open one, or the closed one.
    #[inline(always)]
    pub(crate) fn get(&'static self) -> F {
        let address = self.core.current();
        // SAFETY: `current` only ever holds an `F`: the closed one (`new`) or an open one
        // (`open`).
        unsafe { Address { address }.function }
    }

    /// For the closed function: runs the destructions deferred so far, then opens the gate with
    /// `open` (the resolved function) unless a destruction has been deferred since. Outside
    /// callbacks only.
    #[cold]
    #[inline(never)]
    pub(crate) fn open(&'static self, open: F) {
        reap();
        // SAFETY: as in `new`.
        let address = unsafe { Address { function: open }.address };
        DEFERRED.open(&self.core, address);
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

/// Runs `check` under the queue's lock if no destruction waits (tests: nothing can close the
/// gates meanwhile).
#[cfg(test)]
pub(crate) fn when_none_pending(check: impl FnOnce()) {
    DEFERRED.when_none_pending(check);
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
