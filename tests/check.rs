//! How a scenario reports: a check compares an expectation with what was observed and returns
//! every difference as "what: expected X, seen Y"; a failed step names the step and the CUDA
//! error.

use std::fmt::{self, Debug};

/// The one wrong-expectations switch of the workspace (`HOSTCB_TESTS_WRONG_EXPECTATIONS`):
/// scenarios then alter their expectation so that a correct binding must fail every check.
pub use hostcb_gate::{WRONG_EXPECTATIONS_ENV, wrong_expectations};

/// One difference between what a scenario expected and what it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// What was compared, e.g. `host function calls after 5 launches`.
    pub what: String,
    /// The expected value, as text.
    pub expected: String,
    /// The observed value, as text.
    pub seen: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: expected {}, seen {}",
            self.what, self.expected, self.seen
        )
    }
}

/// A `u32` shown in hex by `{:?}`, e.g. in a [`Mismatch`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Hex(pub u32);

impl Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// Every difference a check found; never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Mismatches(pub Vec<Mismatch>);

impl fmt::Display for Mismatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{m}")?;
        }
        Ok(())
    }
}

/// Collects the differences of one check.
#[derive(Debug, Default)]
pub struct Checker {
    found: Vec<Mismatch>,
}

impl Checker {
    /// A checker with nothing found yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes a difference when `expected != seen`; values are shown with `{:?}`.
    pub fn eq<T: PartialEq + Debug>(&mut self, what: impl Into<String>, expected: T, seen: T) {
        if expected != seen {
            self.found.push(Mismatch {
                what: what.into(),
                expected: format!("{expected:?}"),
                seen: format!("{seen:?}"),
            });
        }
    }

    /// Notes a difference described in words, when `ok` is false.
    pub fn holds(
        &mut self,
        ok: bool,
        what: impl Into<String>,
        expected: impl Into<String>,
        seen: impl Into<String>,
    ) {
        if !ok {
            self.found.push(Mismatch {
                what: what.into(),
                expected: expected.into(),
                seen: seen.into(),
            });
        }
    }

    /// `Ok(())` when nothing differed, else every difference.
    pub fn finish(self) -> Result<(), Mismatches> {
        if self.found.is_empty() {
            Ok(())
        } else {
            Err(Mismatches(self.found))
        }
    }
}

/// Why a scenario failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// A CUDA call failed while setting up or running the scenario.
    #[error("{step}: {source}")]
    Cuda {
        /// What the scenario was doing.
        step: String,
        /// The error of the generated wrapper.
        source: cuda_hostcb::Error,
    },
    /// What the scenario observed differs from what it expected.
    #[error("{0}")]
    Mismatch(#[from] Mismatches),
    /// The canary's check accepted a binding that is known to be wrong.
    #[error("the canary was not caught: {0}")]
    CanaryMissed(String),
    /// The test code used a helper the wrong way.
    #[error("test harness misuse: {0}")]
    Harness(&'static str),
}

impl Failure {
    /// The skip line of a scenario stopped by a function that the installed library is too old
    /// to have, as the crate reports it ([`cuda_hostcb::Error::Unavailable`] with the library's
    /// version below the one the function needs): `None` for any other failure, also for a
    /// function missing from a library of its version or newer (that fails).
    pub fn older_library(&self) -> Option<String> {
        match self {
            Failure::Cuda {
                step,
                source:
                    source @ cuda_hostcb::Error::Unavailable {
                        needs,
                        found: Some(found),
                        ..
                    },
            } if found < needs => Some(format!(
                "skipped, the installed library is older than this step needs: {step}: {source}"
            )),
            _ => None,
        }
    }
}

/// Adds the step to a CUDA error: `result.during("instantiate the graph")?`.
pub trait During<T> {
    /// Maps an error to [`Failure::Cuda`] naming `step`.
    fn during(self, step: &str) -> Result<T, Failure>;
}

impl<T> During<T> for Result<T, cuda_hostcb::Error> {
    fn during(self, step: &str) -> Result<T, Failure> {
        self.map_err(|source| Failure::Cuda {
            step: step.to_owned(),
            source,
        })
    }
}

/// How a scenario ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// It ran and every check held.
    Passed,
    /// It could not run here, for this reason (shown as the trial's skip reason).
    Skipped(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checker_reports_every_difference_with_both_values() {
        let mut c = Checker::new();
        c.eq("calls", 5, 5);
        c.eq("calls after update", 2, 3);
        c.holds(false, "status", "0 everywhere", "1 once");
        let e = c.finish().unwrap_err();
        assert_eq!(
            e.to_string(),
            "calls after update: expected 2, seen 3; status: expected 0 everywhere, seen 1 once"
        );
    }

    #[test]
    fn a_checker_with_nothing_different_passes() {
        let mut c = Checker::new();
        c.eq("calls", 5, 5);
        c.holds(true, "status", "0", "0");
        assert_eq!(c.finish(), Ok(()));
    }

    #[test]
    fn only_a_library_older_than_the_function_skips() {
        let unavailable = |found| Failure::Cuda {
            step: "load the PTX".to_owned(),
            source: cuda_hostcb::Error::Unavailable {
                api: cuda_hostcb::error::Api::Runtime { major: 12 },
                function: "cudaLibraryLoadData",
                needs: 12080,
                found,
                library: "libcudart.so.12",
            },
        };
        let skip = unavailable(Some(12000))
            .older_library()
            .expect("12.0 < 12.8");
        assert!(
            skip.contains("load the PTX") && skip.contains("12.8"),
            "{skip}"
        );
        // The library claims the version and still lacks it, or its version is unknown: a
        // failure, not a skip.
        assert_eq!(unavailable(Some(12090)).older_library(), None);
        assert_eq!(unavailable(None).older_library(), None);
        assert_eq!(Failure::Harness("x").older_library(), None);
    }
}
