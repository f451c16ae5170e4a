//! The address an entry point's wrapper calls through, and its protocol with the first-call
//! stubs ([`super::first`]): model-checked with loom (`cargo xtask loom`, `tests/loom`), which
//! compiles this file.
//!
//! The slot holds the entry point's first-call stub until the function is resolved, then the
//! library's function. Several threads may make the first call at once: each stub call
//! resolves the function (the loader returns the same address to each) and publishes it with
//! `Release`; a wrapper's `Acquire` load that sees the library's address also sees the loaded
//! library behind it. A slot never goes back to its stub.

use std::ffi::c_void;

use super::sync::atomic::{AtomicPtr, Ordering};
use super::sync::const_fn;

/// An entry point's address: its first-call stub, or the library's function once resolved.
#[derive(Debug)]
pub(crate) struct Slot {
    address: AtomicPtr<c_void>,
    /// The first-call stub, which `address` holds until the function is resolved.
    first: *const c_void,
}

// SAFETY: `first` is the address of a function of this crate, which can be called from any
// thread; the rest is an atomic.
unsafe impl Sync for Slot {}
// SAFETY: as above.
unsafe impl Send for Slot {}

impl Slot {
    const_fn! {
        /// A slot holding the first-call stub at `first`.
        pub(crate) fn new(first: *const c_void) -> Slot {
            Slot {
                address: AtomicPtr::new(first.cast_mut()),
                first,
            }
        }
    }

    /// The address to call: the library's function, or the first-call stub. `Acquire` pairs
    /// with [`Slot::publish`]'s `Release`, so the loaded library is visible to a thread that
    /// sees its address (a plain load on x86-64).
    #[inline(always)]
    pub(crate) fn address(&self) -> *const c_void {
        self.address.load(Ordering::Acquire).cast_const()
    }

    /// The library's function, if resolved.
    #[inline(always)]
    pub(crate) fn resolved(&self) -> Option<*const c_void> {
        let address = self.address();
        (address != self.first).then_some(address)
    }

    /// The library's function: the one resolved, or what `resolve` (the out-of-line
    /// resolution, which publishes what it finds) returns.
    #[inline(always)]
    pub(crate) fn get_or<E>(
        &self,
        resolve: impl FnOnce() -> Result<*const c_void, E>,
    ) -> Result<*const c_void, E> {
        match self.resolved() {
            Some(address) => Ok(address),
            None => resolve(),
        }
    }

    /// Publishes the library's function `address` (another thread may have published it too:
    /// it resolved the same address).
    pub(crate) fn publish(&self, address: *const c_void) {
        self.address.store(address.cast_mut(), Ordering::Release);
    }
}
