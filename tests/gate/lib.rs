//! The one GPU gate, the one wrong-expectations switch and the one GPU trial runner that every
//! test crate and example of this workspace uses (the GPU tests in `tests/`, the safe layer's GPU
//! tests, the loader's test, the examples, the GPU benchmark):
//!
//! - [`require_gpu`]: `REQUIRE_GPU=1` (or `true`, `yes`) turns every skip for want of a GPU
//!   into a failure; [`gate`] decides run, skip or fail from what was found;
//! - [`wrong_expectations`]: `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` (or `true`, `yes`) makes every
//!   checking test expect something wrong, so that each check must fail: the way to see on a GPU
//!   that the checks can fail. [`check!`] and [`check_eq!`] are `assert!` and `assert_eq!` that
//!   obey it; [`expect_eq`], [`expect_that`], [`expect_at_most`] and [`expect_seq`] are the
//!   same checks returning what differs;
//! - [`probe_gpu`]: `cuInit(0)` and `cuDeviceGetCount` through the newest target's driver
//!   bindings, or why no GPU is usable;
//! - `trials` (with the cargo feature `trials`): the harness of every GPU test executable, over
//!   libtest-mimic: one probe, every trial run, visibly skipped or failed as the gate says, one
//!   `SKIP:`/`FAIL:` line per reason, trials one at a time, children of the executable, a
//!   watchdog.

use std::sync::OnceLock;

use cuda_hostcb::Error;

#[cfg(feature = "trials")]
pub mod trials;

/// The variable that turns every skip for want of a GPU (or a runtime) into a failure.
pub const REQUIRE_GPU_ENV: &str = "REQUIRE_GPU";

/// The variable that makes every check expect something wrong, so that each must fail.
pub const WRONG_EXPECTATIONS_ENV: &str = "HOSTCB_TESTS_WRONG_EXPECTATIONS";

/// Whether a switch's value turns it on: `1`, `true` or `yes` (any case, surrounding blanks
/// ignored). Anything else, and no value, is off.
pub fn on(value: Option<&str>) -> bool {
    value.is_some_and(|v| ["1", "true", "yes"].contains(&v.trim().to_ascii_lowercase().as_str()))
}

/// Whether the environment variable `name` is on (see [`on`]).
pub fn env_on(name: &str) -> bool {
    on(std::env::var(name).ok().as_deref())
}

/// Whether `REQUIRE_GPU` is on (read once).
pub fn require_gpu() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| env_on(REQUIRE_GPU_ENV))
}

/// Whether `HOSTCB_TESTS_WRONG_EXPECTATIONS` is on (read once).
pub fn wrong_expectations() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| env_on(WRONG_EXPECTATIONS_ENV))
}

/// What a GPU test does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Run it.
    Run,
    /// Skip it visibly, for this reason.
    Skip(String),
    /// Fail it at once, for this reason (`REQUIRE_GPU` is on).
    Fail(String),
}

/// The gate for a test that can run (`Ok`) or lacks what it needs (`Err(why)`), with `REQUIRE_GPU`
/// on or off: the one rule of every GPU test here.
pub fn gate(usable: Result<(), String>, require_gpu: bool) -> Gate {
    match usable {
        Ok(()) => Gate::Run,
        Err(why) if require_gpu => Gate::Fail(format!("{REQUIRE_GPU_ENV}=1, and {why}")),
        Err(why) => Gate::Skip(why),
    }
}

/// A usable GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Devices `cuDeviceGetCount` reports.
    pub devices: usize,
    /// The driver's version, if it could be read.
    pub driver_version: Option<u32>,
}

/// Why no GPU is usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    /// A few words, for each skipped test's line.
    pub short: String,
    /// The whole error, for summaries and failures.
    pub detail: String,
}

/// `cuInit(0)` and `cuDeviceGetCount` through the newest target's driver bindings.
pub fn probe_gpu() -> Result<Gpu, Unusable> {
    macro_rules! probe {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {{
            use cuda_hostcb::$target::driver as cu;
            // SAFETY: a plain call.
            unsafe { cu::cuInit(0) }.map_err(|e| unusable(&e, "cuInit(0)"))?;
            let mut count = 0;
            // SAFETY: `count` is valid for writes.
            unsafe { cu::cuDeviceGetCount(&mut count) }
                .map_err(|e| unusable(&e, "cuDeviceGetCount"))?;
            count
        }};
    }
    let count: i32 = cuda_hostcb::newest_target!(probe);
    let devices = usize::try_from(count).unwrap_or(0);
    if devices == 0 {
        return Err(Unusable {
            short: "no CUDA device (cuDeviceGetCount = 0)".to_owned(),
            detail: format!("cuDeviceGetCount reports {count} devices"),
        });
    }
    Ok(Gpu {
        devices,
        driver_version: cuda_hostcb::load::driver_version().ok(),
    })
}

/// `CUDA_ERROR_NO_DEVICE`.
const NO_DEVICE: u32 = 100;

fn unusable(e: &Error, call: &str) -> Unusable {
    let short = match e {
        Error::LibraryNotFound { library, .. } => format!("no CUDA driver ({library} not found)"),
        Error::Cuda {
            code: NO_DEVICE, ..
        } => format!("no CUDA device ({call}: {})", e.name().unwrap_or_default()),
        Error::Cuda { .. } => format!("{call} failed with {}", e.name().unwrap_or_default()),
        _ => format!("{call} failed"),
    };
    Unusable {
        short,
        detail: e.to_string(),
    }
}

/// The one rule of every check: `Ok(())` when `holds` and the switch is off, or when neither;
/// else `what` with why: `differs` (it did not hold) or `same` (it held, and the switch wanted
/// it not to).
fn verdict(
    what: &str,
    holds: bool,
    differs: impl FnOnce() -> String,
    same: impl FnOnce() -> String,
) -> Result<(), String> {
    match (holds, wrong_expectations()) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(format!("{what}: {}", differs())),
        (true, true) => Err(format!(
            "{what}: {}, and {WRONG_EXPECTATIONS_ENV}=1 wanted anything else",
            same()
        )),
    }
}

/// `Ok(())` when `expected == seen`, else what differs; with [`wrong_expectations`] on, the other
/// way round (equal values are the failure), so that every check must fail.
///
/// The error is a `String`; `?` turns it into a trial's failure (`trials::Failed`) where the
/// feature `trials` is on.
pub fn expect_eq<T: PartialEq + std::fmt::Debug>(
    what: &str,
    expected: T,
    seen: T,
) -> Result<(), String> {
    verdict(
        what,
        expected == seen,
        || format!("expected {expected:?}, seen {seen:?}"),
        || format!("seen {seen:?} as expected"),
    )
}

/// `Ok(())` when `holds`, else what was `seen`; with [`wrong_expectations`] on, the other way
/// round.
pub fn expect_that(what: &str, holds: bool, seen: impl std::fmt::Debug) -> Result<(), String> {
    verdict(
        what,
        holds,
        || format!("does not hold; seen {seen:?}"),
        || format!("holds (seen {seen:?})"),
    )
}

/// `Ok(())` when `seen <= most`, else both; with [`wrong_expectations`] on, the other way round.
pub fn expect_at_most(what: &str, most: usize, seen: usize) -> Result<(), String> {
    verdict(
        what,
        seen <= most,
        || format!("expected at most {most}, seen {seen}"),
        || format!("seen {seen}, at most {most} as expected"),
    )
}

/// [`expect_eq`] for two long sequences: a difference names the first item that differs and
/// both lengths instead of printing every item.
pub fn expect_seq<T: PartialEq + std::fmt::Debug>(
    what: &str,
    expected: &[T],
    seen: &[T],
) -> Result<(), String> {
    verdict(
        what,
        expected == seen,
        || match expected.iter().zip(seen).position(|(e, s)| e != s) {
            Some(i) => format!(
                "item {i}: expected {:?}, seen {:?} ({} items expected, {} seen)",
                expected[i],
                seen[i],
                expected.len(),
                seen.len()
            ),
            None => format!("expected {} items, seen {}", expected.len(), seen.len()),
        },
        || format!("{} items as expected", seen.len()),
    )
}

/// `assert!` that obeys [`wrong_expectations`]: with it on, the condition must be false.
#[macro_export]
macro_rules! check {
    ($cond:expr $(,)?) => {
        $crate::check!($cond, "{}", stringify!($cond))
    };
    ($cond:expr, $($fmt:tt)+) => {
        if bool::from($cond) == $crate::wrong_expectations() {
            panic!(
                "check failed{}: {}",
                if $crate::wrong_expectations() { " (wrong expectations on: it had to be false)" } else { "" },
                format_args!($($fmt)+)
            );
        }
    };
}

/// `assert_eq!` that obeys [`wrong_expectations`]: with it on, the two must differ.
#[macro_export]
macro_rules! check_eq {
    ($left:expr, $right:expr $(,)?) => {
        $crate::check_eq!($left, $right, "")
    };
    ($left:expr, $right:expr, $($fmt:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if (*left == *right) == $crate::wrong_expectations() {
                    panic!(
                        "check_eq failed{}: left {:?}, right {:?} {}",
                        if $crate::wrong_expectations() { " (wrong expectations on: they had to differ)" } else { "" },
                        left,
                        right,
                        format_args!($($fmt)+)
                    );
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_two_three_ways_to_say_on() {
        for yes in ["1", "true", "TRUE", "yes", " Yes "] {
            assert!(on(Some(yes)), "{yes}");
        }
        for no in ["", "0", "false", "no", "2", "on"] {
            assert!(!on(Some(no)), "{no}");
        }
        assert!(!on(None));
    }

    #[test]
    fn every_check_reports_both_sides_or_turns_round_with_the_switch() {
        let checks = [
            (expect_eq("calls", 10, 10), expect_eq("calls", 11, 10)),
            (
                expect_that("drained", true, 0),
                expect_that("drained", false, 3),
            ),
            (expect_at_most("held", 6, 6), expect_at_most("held", 6, 7)),
            (
                expect_seq("order", &[1, 2, 3], &[1, 2, 3]),
                expect_seq("order", &[1, 2, 3], &[1, 5, 3, 4]),
            ),
        ];
        let reports: Vec<String> = checks
            .into_iter()
            .map(|(holds, differs)| {
                if wrong_expectations() {
                    assert_eq!(differs, Ok(()));
                    holds.unwrap_err()
                } else {
                    assert_eq!(holds, Ok(()));
                    differs.unwrap_err()
                }
            })
            .collect();
        let want = if wrong_expectations() {
            [
                "calls: seen 10 as expected",
                "drained: holds (seen 0)",
                "held: seen 6, at most 6 as expected",
                "order: 3 items as expected",
            ]
            .map(|r| format!("{r}, and {WRONG_EXPECTATIONS_ENV}=1 wanted anything else"))
        } else {
            [
                "calls: expected 11, seen 10",
                "drained: does not hold; seen 3",
                "held: expected at most 6, seen 7",
                "order: item 1: expected 2, seen 5 (3 items expected, 4 seen)",
            ]
            .map(str::to_owned)
        };
        assert_eq!(reports, want);
    }

    #[test]
    fn the_gate_runs_skips_or_fails() {
        assert_eq!(gate(Ok(()), true), Gate::Run);
        assert_eq!(
            gate(Err("no GPU".into()), false),
            Gate::Skip("no GPU".into())
        );
        assert_eq!(
            gate(Err("no GPU".into()), true),
            Gate::Fail("REQUIRE_GPU=1, and no GPU".into())
        );
    }
}
