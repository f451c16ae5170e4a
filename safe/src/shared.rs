//! The shared cell of a graph's host node (`Graph::add_host_node`, and the closures of an
//! updatable executable's store; a row of the ownership table in `lib.rs`): the closure boxed
//! for any number of calls by reference, its host function, and the user-object destructor that
//! hands it to the reaper once no graph, executable or launch needs it. `Graph::keep` uses the
//! same destructor for any value.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::callback::HostFn;
use crate::inside::Inside;
use crate::panic::{PanicStage, report};
use crate::reaper::release;

/// A closure boxed for any number of calls, as a host function, its user data and the
/// destructor a user object calls once no graph, executable or launch needs it any more.
///
/// Dropping it before [`into_parts`](Self::into_parts) drops the closure uncalled.
pub(crate) struct Shared {
    call: HostFn,
    destroy: HostFn,
    discard: unsafe fn(*mut c_void),
    data: *mut c_void,
}

impl Shared {
    #[inline]
    pub(crate) fn new<F: Fn() + Send + Sync + 'static>(f: F) -> Shared {
        Shared {
            call: call_shared::<F>,
            destroy: drop_shared::<F>,
            discard: discard::<F>,
            data: Box::into_raw(Box::new(f)).cast(),
        }
    }

    /// The host function, the destructor, the drop here (of a closure never handed to CUDA) and
    /// the user data, the box given up: the caller disposes of it through one of the two.
    #[inline]
    pub(crate) fn into_parts(self) -> (HostFn, HostFn, unsafe fn(*mut c_void), *mut c_void) {
        let parts = (self.call, self.destroy, self.discard, self.data);
        std::mem::forget(self);
        parts
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: `data` is the box made in `new` for this `discard`, not handed over.
        unsafe { (self.discard)(self.data) }
    }
}

/// Drops a box of an `F` (one never handed to CUDA, on the thread that made it, or one the
/// reaper drops).
///
/// # Safety
/// `data` is a `Box<F>` the caller owns, given up.
pub(crate) unsafe fn discard<F>(data: *mut c_void) {
    // SAFETY: the caller passes the pointer of a `Box<F>` it owns.
    drop(unsafe { Box::from_raw(data.cast::<F>()) });
}

/// The host function of a closure owned by a user object: calls it by reference.
///
/// # Safety
/// `data` is a `Box<F>` made by [`Shared::new`] that [`drop_shared`] has not dropped yet.
pub(crate) unsafe extern "C" fn call_shared<F: Fn() + Send + Sync>(data: *mut c_void) {
    let _inside = Inside::enter();
    // SAFETY: by this function's contract, the closure is alive; `F: Sync`, so concurrent
    // launches may share it.
    let f = unsafe { &*data.cast::<F>() };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report(PanicStage::Call, payload);
    }
}

/// The user-object destructor of a closure (or of any value a graph keeps), once the last
/// holder is gone: hands it to the reaper, which drops it on a program thread.
///
/// # Safety
/// `data` is a `Box<F>` made by [`Shared::new`]; called once, after every call.
pub(crate) unsafe extern "C" fn drop_shared<F: Send + 'static>(data: *mut c_void) {
    let _inside = Inside::enter();
    // SAFETY: by this function's contract, the box is ours; `F: Send`.
    unsafe { release::<F>(data, discard::<F>) };
}
