//! The synchronisation primitives the concurrent protocols use: the standard library's here.
//!
//! The protocol modules ([`crate::protocol::backlog`], [`crate::protocol::deferral`], [`crate::protocol::book`],
//! [`crate::protocol::signal`], [`crate::protocol::store`]) take every lock, atomic and thread operation from
//! `crate::sync`. The model-checking crate `tests/loom` compiles those same files against a facade
//! of the same shape that, with its feature `loom`, gives loom's primitives instead, so that loom
//! explores the interleavings of the code that runs here (see `docs/testing.md`).

pub(crate) use std::sync::atomic;
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Threads: the handle to wake one.
pub(crate) mod thread {
    pub(crate) use std::thread::Thread;
}

/// A `const fn` here; a plain `fn` under loom, whose primitives have no `const` constructors
/// (the protocols' `static`s are built only here).
macro_rules! const_fn {
    ($(#[$meta:meta])* $vis:vis fn $($rest:tt)*) => {
        $(#[$meta])* $vis const fn $($rest)*
    };
}
pub(crate) use const_fn;

/// A thread-local `Cell<bool>`, false on each thread at first (loom's facade makes it loom's).
macro_rules! thread_flag {
    ($(#[$meta:meta])* $name:ident) => {
        std::thread_local! {
            $(#[$meta])*
            static $name: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
    };
}
pub(crate) use thread_flag;
