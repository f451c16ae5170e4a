//! The scenarios of the regression suite, each written once for any [`Binding`].
//!
//! A scenario module keeps three things apart: `observe` sets CUDA up, runs it and returns
//! plain data of what the host functions recorded; `check` compares that with an expectation
//! and returns every difference ([`Mismatches`](crate::check::Mismatches)), never panicking;
//! `run` joins them for the trial. Host functions and callbacks only record (atomics, a
//! mutex-guarded list); every assertion runs on the test thread after synchronising.
//!
//! [`Binding`]: crate::binding::Binding

pub mod canary;
pub mod devices;
pub mod host_func_v2;
pub mod host_nodes;
pub mod kernels;
pub mod ordering;
pub mod replay;
pub mod stream_callbacks;
pub mod user_data;
pub mod user_objects;

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// `data` as the `void *` a host function gets: the address of a value the caller owns.
pub(crate) fn user_data<T>(value: &T) -> *mut c_void {
    std::ptr::from_ref(value).cast_mut().cast()
}

/// Locks a list that callbacks append to; a poisoned lock still gives the data (a callback
/// never panics, but the test thread must not panic on it either).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls `done` every millisecond for at most `limit`; the time it took, or `None`.
pub(crate) fn wait_for(limit: Duration, done: impl Fn() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if done() {
            return Some(start.elapsed());
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Names an address by the first of `known` with that address, else shows it in hex.
pub(crate) fn label(address: usize, known: &[(usize, &str)]) -> String {
    known
        .iter()
        .find(|(a, _)| *a == address)
        .map_or_else(|| format!("{address:#x}"), |(_, name)| (*name).to_owned())
}
