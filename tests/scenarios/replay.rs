//! Scenario 1, the failure these bindings exist to prevent (the README's "Why": a trampoline
//! that frees its record after the first call): a host function captured into a graph with
//! `cuLaunchHostFunc` / `cudaLaunchHostFunc` runs exactly once per launch of the instantiated
//! graph: five launches, and 10,000.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use super::user_data;
use crate::binding::{Binding, HostFn};
use crate::check::{Checker, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, Stream};

/// Counts the calls of [`count_call`].
#[derive(Debug, Default)]
pub struct Counter {
    calls: AtomicU64,
}

impl Counter {
    /// The calls so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

/// The host function under test: counts one call in the [`Counter`] that `data` points at.
///
/// # Safety
/// `data` must point at a live [`Counter`].
pub unsafe extern "C" fn count_call(data: *mut c_void) {
    // SAFETY: the caller passes a live `Counter`.
    let counter = unsafe { &*data.cast::<Counter>() };
    counter.calls.fetch_add(1, Ordering::SeqCst);
}

/// How a host function reaches the stream: the binding under test, or (for the canary) a
/// deliberately wrong wrapper around it.
pub trait Launcher<B: Binding> {
    /// Enqueues (or, while capturing, records) `f(data)` on `stream`.
    ///
    /// # Safety
    /// As for [`Binding::launch_host_func`]; the launcher itself must outlive every launch too.
    unsafe fn launch(
        &self,
        stream: &Stream<B>,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Failure>;
}

/// The binding's own `cuLaunchHostFunc` / `cudaLaunchHostFunc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Direct;

impl<B: Binding> Launcher<B> for Direct {
    unsafe fn launch(
        &self,
        stream: &Stream<B>,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Failure> {
        // SAFETY: forwarded from the caller.
        unsafe { stream.launch_host_func(f, data) }
    }
}

/// What a replay run saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// How often the graph was launched.
    pub launches: u64,
    /// How often the host function ran.
    pub calls: u64,
}

/// Captures `count_call` through `launcher` on device 0, instantiates the graph, launches it
/// `launches` times, synchronises and counts the calls.
pub fn observe<B: Binding, L: Launcher<B>>(
    launcher: &L,
    launches: u64,
) -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let counter = Counter::default();
    let stream = Stream::<B>::new()?;
    let capture = stream.begin_capture()?;
    // SAFETY: `counter` and the launcher outlive the stream, whose drop waits for its work.
    unsafe { launcher.launch(&stream, count_call, user_data(&counter)) }?;
    let graph = capture.end()?;
    let exec = graph.instantiate()?;
    for _ in 0..launches {
        exec.launch(&stream)?;
    }
    stream.sync()?;
    Ok(Observation {
        launches,
        calls: counter.calls(),
    })
}

/// Scenario 1's check: the host function ran `expected_calls` times.
pub fn check(expected_calls: u64, seen: &Observation) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq(
        format!("host function calls after {} launches", seen.launches),
        expected_calls,
        seen.calls,
    );
    c.finish()
}

fn run<B: Binding>(launches: u64) -> Result<Ran, Failure> {
    let seen = observe::<B, _>(&Direct, launches)?;
    let expected = if wrong_expectations() {
        launches + 1
    } else {
        launches
    };
    check(expected, &seen)?;
    Ok(Ran::Passed)
}

/// Five launches, five calls.
pub fn five<B: Binding>() -> Result<Ran, Failure> {
    run::<B>(5)
}

/// 10,000 launches, 10,000 calls, no crash.
pub fn ten_thousand<B: Binding>() -> Result<Ran, Failure> {
    run::<B>(10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_passes_one_call_per_launch() {
        let seen = Observation {
            launches: 5,
            calls: 5,
        };
        assert_eq!(check(5, &seen), Ok(()));
    }

    #[test]
    fn the_check_reports_a_wrong_count_with_both_values() {
        let seen = Observation {
            launches: 5,
            calls: 1,
        };
        assert_eq!(
            check(5, &seen).unwrap_err().to_string(),
            "host function calls after 5 launches: expected 5, seen 1"
        );
    }

    #[test]
    fn count_call_counts() {
        let counter = Counter::default();
        // SAFETY: `counter` is a live `Counter`.
        unsafe {
            count_call(user_data(&counter));
            count_call(user_data(&counter));
        }
        assert_eq!(counter.calls(), 2);
    }
}
