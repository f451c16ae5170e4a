//! The facade the protocol modules take their primitives from (`crate::sync`): loom's under
//! the feature `loom`, the standard library's otherwise, in the shape of the safe layer's
//! `safe/src/sync.rs` and the loader's `generated/src/load.rs` `sync` module.

#[cfg(feature = "loom")]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};

/// Threads: the handle to wake one, parking, and a timed park; spawning and the rest for the
/// models (`models.rs`), which play the protocols' other threads.
#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) mod thread {
    #[cfg(feature = "loom")]
    pub(crate) use loom::thread::{Thread, current, park, spawn, yield_now};
    #[cfg(not(feature = "loom"))]
    pub(crate) use std::thread::{Thread, current, park, park_timeout, spawn, yield_now};

    /// Loom has no timed park: one that times out at once is among the real one's outcomes
    /// (it may return at any time), and keeps every wake-up the protocol relies on visible.
    #[cfg(feature = "loom")]
    pub(crate) fn park_timeout(_: std::time::Duration) {
        loom::thread::yield_now();
    }
}

/// A `const fn` without loom (as in the crates that hold the protocols' `static`s); a plain
/// `fn` under loom, whose primitives have no `const` constructors.
macro_rules! const_fn {
    ($(#[$meta:meta])* $vis:vis fn $($rest:tt)*) => {
        #[cfg(not(feature = "loom"))]
        $(#[$meta])* $vis const fn $($rest)*
        #[cfg(feature = "loom")]
        $(#[$meta])* $vis fn $($rest)*
    };
}
pub(crate) use const_fn;

/// A thread-local `Cell<bool>`, false on each thread at first: loom's under the feature `loom` (whose
/// macro takes no `const` initialiser), the standard library's otherwise.
macro_rules! thread_flag {
    ($(#[$meta:meta])* $name:ident) => {
        #[cfg(feature = "loom")]
        loom::thread_local! {
            $(#[$meta])*
            static $name: std::cell::Cell<bool> = std::cell::Cell::new(false);
        }
        #[cfg(not(feature = "loom"))]
        std::thread_local! {
            $(#[$meta])*
            static $name: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
    };
}
pub(crate) use thread_flag;
