//! Whether the current thread is inside a callback of this crate (a host function, a stream
//! callback or a user-object destructor that CUDA runs), where no CUDA call is permitted. A leaf:
//! every module that must know asks here.

use std::cell::Cell;

thread_local! {
    /// How many trampolines are running on this thread (more than one only if a callback is
    /// called from inside another, which CUDA does not do).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Marks the current thread as inside a callback while it lives.
pub(crate) struct Inside;

impl Inside {
    #[inline]
    pub(crate) fn enter() -> Inside {
        DEPTH.with(|d| d.set(d.get() + 1));
        Inside
    }
}

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Whether the current thread is running a callback or a destructor of this crate.
#[inline]
pub(crate) fn in_callback() -> bool {
    DEPTH.with(|d| d.get() > 0)
}
