//! Scenario 9: a canary proving that scenario 1 can fail. Scenario 1's check runs against a
//! deliberately wrong binding that, like the old trampoline, forwards only the first call of a
//! captured host function, and it must report exactly that.
//!
//! The wrong binding has no undefined behaviour: its shim stays alive and simply stops calling
//! the real function after the first call (the old trampoline freed its record instead).

use std::ffi::c_void;
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::replay::{self, Launcher};
use super::user_data;
use crate::binding::{Binding, HostFn};
use crate::check::{Failure, Mismatch, Mismatches, Ran, wrong_expectations};
use crate::resources::Stream;

/// The wrong binding: it launches a shim that calls the real host function on its first call
/// only. Serves one launch (one capture).
#[derive(Debug, Default)]
pub struct StopsAfterFirstCall {
    /// The real function and its user data (an exposed address).
    target: OnceLock<(HostFn, usize)>,
    /// Calls of the shim, forwarded or not.
    calls: AtomicU64,
}

impl StopsAfterFirstCall {
    /// A shim with nothing launched yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How often the shim itself was called.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

/// The shim: forwards the first call to the real host function, then stops.
///
/// # Safety
/// `shim` must point at a live [`StopsAfterFirstCall`] whose target is callable.
unsafe extern "C" fn forward_first_call_only(shim: *mut c_void) {
    // SAFETY: the caller passes a live shim.
    let shim = unsafe { &*shim.cast::<StopsAfterFirstCall>() };
    if shim.calls.fetch_add(1, Ordering::SeqCst) == 0
        && let Some(&(f, data)) = shim.target.get()
    {
        // SAFETY: the target was vouched for when it was launched.
        unsafe { f(ptr::with_exposed_provenance_mut(data)) }
    }
}

impl<B: Binding> Launcher<B> for StopsAfterFirstCall {
    unsafe fn launch(
        &self,
        stream: &Stream<B>,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Failure> {
        if self.target.set((f, data.expose_provenance())).is_err() {
            return Err(Failure::Harness(
                "a StopsAfterFirstCall shim serves one launch only",
            ));
        }
        // SAFETY: the caller keeps `self` (and through it `f(data)`) alive for every launch.
        unsafe { stream.launch_host_func(forward_first_call_only, user_data(self)) }
    }
}

/// The report scenario 1's check must give for the canary: 1 call after 5 launches.
pub fn expected_report(launches: u64) -> Mismatches {
    Mismatches(vec![Mismatch {
        what: format!("host function calls after {launches} launches"),
        expected: launches.to_string(),
        seen: "1".to_owned(),
    }])
}

/// Runs scenario 1 (5 launches) through [`StopsAfterFirstCall`] and requires its check to
/// report the missing calls exactly.
pub fn run<B: Binding>() -> Result<Ran, Failure> {
    let launches = 5;
    let shim = StopsAfterFirstCall::new();
    let seen = replay::observe::<B, _>(&shim, launches)?;
    let mut wanted = expected_report(launches);
    if wrong_expectations() {
        wanted.0[0].seen = "2".to_owned();
    }
    judge(
        replay::check(launches, &seen),
        &wanted,
        shim.calls(),
        launches,
    )
}

/// Whether scenario 1's check caught the canary with the `wanted` report.
pub fn judge(
    report: Result<(), Mismatches>,
    wanted: &Mismatches,
    shim_calls: u64,
    launches: u64,
) -> Result<Ran, Failure> {
    match report {
        Err(report) if report == *wanted => Ok(Ran::Passed),
        Err(report) => Err(Failure::CanaryMissed(format!(
            "scenario 1's check reported \"{report}\", expected it to report \"{wanted}\""
        ))),
        Ok(()) => Err(Failure::CanaryMissed(format!(
            "scenario 1's check passed a binding that stops forwarding after the first call \
             ({shim_calls} shim calls for {launches} launches); expected it to report \
             \"{wanted}\""
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_forwards_the_first_call_only() {
        let counter = replay::Counter::default();
        let shim = StopsAfterFirstCall::new();
        shim.target
            .set((replay::count_call, user_data(&counter).expose_provenance()))
            .unwrap();
        for _ in 0..5 {
            // SAFETY: `shim` is live and its target is a live counter.
            unsafe { forward_first_call_only(user_data(&shim)) };
        }
        assert_eq!((shim.calls(), counter.calls()), (5, 1));
    }

    #[test]
    fn the_canary_is_caught_when_the_check_reports_the_missing_calls() {
        let seen = replay::Observation {
            launches: 5,
            calls: 1,
        };
        let wanted = expected_report(5);
        assert_eq!(
            judge(replay::check(5, &seen), &wanted, 5, 5).unwrap(),
            Ran::Passed
        );
    }

    #[test]
    fn the_canary_fails_when_the_check_lets_it_pass() {
        let wanted = expected_report(5);
        let e = judge(Ok(()), &wanted, 5, 5).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "the canary was not caught: scenario 1's check passed a binding that stops"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_canary_fails_when_the_report_differs() {
        let seen = replay::Observation {
            launches: 5,
            calls: 0,
        };
        let wanted = expected_report(5);
        let e = judge(replay::check(5, &seen), &wanted, 5, 5).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the canary was not caught: scenario 1's check reported \"host function calls \
             after 5 launches: expected 5, seen 0\", expected it to report \"host function \
             calls after 5 launches: expected 5, seen 1\""
        );
    }
}
