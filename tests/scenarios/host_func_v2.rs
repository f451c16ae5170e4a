//! Scenario 8: the newer API on an older driver. Where the target declares
//! `cuLaunchHostFunc_v2` / `cudaLaunchHostFunc_v2` (first in the 13.2 headers, so only the 13.5
//! target), the test calls it with each sync mode the target declares. What must happen follows
//! from the versions the test reads first: with a 13.2+ driver (and, for the runtime API, a
//! 13.2+ runtime) the host function runs once per mode; where the driver (or runtime) predates
//! 13.2 the call returns exactly the typed [`Error::Unavailable`], naming the function, 13.2
//! and the version found, and nothing runs.
//!
//! [`Error::Unavailable`]: cuda_hostcb::Error::Unavailable

use std::fmt;
use std::path::Path;

use cuda_hostcb::Error;
use cuda_hostcb::error::Api as ErrorApi;

use super::replay::Counter;
use super::{replay, user_data};
use crate::binding::{Api, HostFuncV2};
use crate::check::{Checker, During, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, Stream};

/// The driver the `_v2` launch needs: 13.2, the first whose `cudaTypedefs.h` declares
/// `PFN_cuLaunchHostFunc_v13010` (its ABI number says 13.1; a 13.1 driver that lacks it answers
/// with the three-argument function, so the loader refuses drivers below 13.2).
pub const NEEDS: u32 = 13020;
/// The first runtime that has `cudaLaunchHostFunc_v2`: the 13.2 header is the first to declare it
/// (the 13.1 header lacks it), whatever the driver ABI version says.
pub const RUNTIME_NEEDS: u32 = 13020;
/// `cudaErrorInsufficientDriver` and `cudaErrorCallRequiresNewerDriver`: what a 13.1+ runtime
/// may return on an older driver.
pub const NEWER_DRIVER_CODES: [u32; 2] = [35, 36];

/// A call's outcome, reduced to what the check compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// [`Error::Unavailable`], with the library's file name.
    Unavailable {
        /// The API the error names.
        api: ErrorApi,
        /// The function it names.
        function: String,
        /// The version it says the function needs.
        needs: u32,
        /// The installed version it found.
        found: Option<u32>,
        /// The file name of the library it looked in.
        library_file: String,
    },
    /// [`Error::Cuda`].
    Cuda {
        /// The function it names.
        function: String,
        /// The error code.
        code: u32,
    },
    /// Any other error, as text.
    Other(String),
}

impl Outcome {
    /// Reduces a wrapper's result.
    pub fn of(result: &Result<(), Error>) -> Self {
        match result {
            Ok(()) => Outcome::Ok,
            Err(Error::Unavailable {
                api,
                function,
                needs,
                found,
                library,
            }) => Outcome::Unavailable {
                api: *api,
                function: (*function).to_owned(),
                needs: *needs,
                found: *found,
                library_file: Path::new(library)
                    .file_name()
                    .map_or_else(|| library.to_string(), |f| f.to_string_lossy().into_owned()),
            },
            Err(Error::Cuda { function, code, .. }) => Outcome::Cuda {
                function: (*function).to_owned(),
                code: *code,
            },
            Err(e) => Outcome::Other(e.to_string()),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("success"),
            Outcome::Unavailable {
                api,
                function,
                needs,
                found,
                library_file,
            } => write!(
                f,
                "Unavailable {{ {function}, {api}, needs {needs}, found {found:?}, in {library_file} }}"
            ),
            Outcome::Cuda { function, code } => write!(f, "Cuda {{ {function}, code {code} }}"),
            Outcome::Other(text) => write!(f, "another error: {text}"),
        }
    }
}

/// What one sync mode gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeSeen {
    /// The sync mode's constant.
    pub mode: &'static str,
    /// The launch's outcome.
    pub outcome: Outcome,
    /// How often the host function ran.
    pub calls: u64,
}

/// What the run saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The API called.
    pub api: Api,
    /// The function called.
    pub function: &'static str,
    /// The driver's version, read through the binding.
    pub driver_version: u32,
    /// The runtime's version (runtime API only).
    pub runtime_version: Option<u32>,
    /// One entry per sync mode.
    pub modes: Vec<ModeSeen>,
}

/// What every mode must give: one of `outcomes`, and `calls` host-function calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// The acceptable outcomes (one, except for a new runtime on an old driver).
    pub outcomes: Vec<Outcome>,
    /// Host-function calls per mode.
    pub calls: u64,
}

/// The contract, from the versions read.
pub fn expected(
    api: Api,
    function: &str,
    driver_version: u32,
    runtime_version: Option<u32>,
) -> Expectation {
    let runs = Expectation {
        outcomes: vec![Outcome::Ok],
        calls: 1,
    };
    let unavailable = |api, needs, found, library_file: &str| Expectation {
        outcomes: vec![Outcome::Unavailable {
            api,
            function: function.to_owned(),
            needs,
            found: Some(found),
            library_file: library_file.to_owned(),
        }],
        calls: 0,
    };
    match api {
        Api::Driver if driver_version >= NEEDS => runs,
        Api::Driver => unavailable(ErrorApi::Driver, NEEDS, driver_version, "libcuda.so.1"),
        Api::Runtime { major } => {
            let runtime = runtime_version.unwrap_or(0);
            if runtime < RUNTIME_NEEDS {
                unavailable(
                    ErrorApi::Runtime { major },
                    RUNTIME_NEEDS,
                    runtime,
                    &format!("libcudart.so.{major}"),
                )
            } else if driver_version >= NEEDS {
                runs
            } else {
                Expectation {
                    outcomes: NEWER_DRIVER_CODES
                        .iter()
                        .map(|&code| Outcome::Cuda {
                            function: function.to_owned(),
                            code,
                        })
                        .collect(),
                    calls: 0,
                }
            }
        }
    }
}

/// Reads the versions, then launches the counting host function with each sync mode.
pub fn observe<B: HostFuncV2>() -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let driver_version = B::driver_version().during("read the driver version")?;
    let runtime_version = B::runtime_version()
        .transpose()
        .during("read the runtime version")?;
    let counters: Vec<Counter> = B::SYNC_MODES.iter().map(|_| Counter::default()).collect();
    let stream = Stream::<B>::new()?;
    let mut modes = Vec::new();
    for ((mode, value), counter) in B::SYNC_MODES.iter().zip(&counters) {
        // SAFETY: the counters outlive the stream, whose drop waits for its work.
        let result = unsafe {
            B::launch_host_func_v2(stream.raw(), replay::count_call, user_data(counter), *value)
        };
        stream.sync()?;
        modes.push(ModeSeen {
            mode,
            outcome: Outcome::of(&result),
            calls: counter.calls(),
        });
    }
    Ok(Observation {
        api: B::API,
        function: B::FUNCTION,
        driver_version,
        runtime_version,
        modes,
    })
}

/// Scenario 8's check.
pub fn check(expected: &Expectation, seen: &Observation) -> Result<(), Mismatches> {
    let versions = match seen.runtime_version {
        Some(rt) => format!("driver {}, runtime {rt}", seen.driver_version),
        None => format!("driver {}", seen.driver_version),
    };
    let wanted = expected
        .outcomes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" or ");
    let mut c = Checker::new();
    c.holds(
        !seen.modes.is_empty(),
        "sync modes tried",
        "at least one",
        "none",
    );
    for m in &seen.modes {
        c.holds(
            expected.outcomes.contains(&m.outcome),
            format!("{} with {} ({versions})", seen.function, m.mode),
            wanted.clone(),
            m.outcome.to_string(),
        );
        c.eq(
            format!("host-function calls with {}", m.mode),
            expected.calls,
            m.calls,
        );
    }
    c.finish()
}

/// The trial.
pub fn run<B: HostFuncV2>() -> Result<Ran, Failure> {
    let seen = observe::<B>()?;
    let mut want = expected(
        seen.api,
        seen.function,
        seen.driver_version,
        seen.runtime_version,
    );
    if wrong_expectations() {
        // The other branch: as if the versions had been misread.
        want = if want.outcomes == [Outcome::Ok] {
            expected(seen.api, seen.function, 13000, Some(13000))
        } else {
            expected(seen.api, seen.function, NEEDS, Some(RUNTIME_NEEDS))
        };
    }
    check(&want, &seen)?;
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable_driver() -> Outcome {
        Outcome::Unavailable {
            api: ErrorApi::Driver,
            function: "cuLaunchHostFunc_v2".to_owned(),
            needs: NEEDS,
            found: Some(13000),
            library_file: "libcuda.so.1".to_owned(),
        }
    }

    #[test]
    fn the_expectation_follows_the_versions() {
        let f = "cuLaunchHostFunc_v2";
        assert_eq!(
            expected(Api::Driver, f, 13000, None).outcomes,
            vec![unavailable_driver()]
        );
        assert_eq!(
            expected(Api::Driver, f, 13010, None).outcomes[0],
            Outcome::Unavailable {
                api: ErrorApi::Driver,
                function: f.to_owned(),
                needs: NEEDS,
                found: Some(13010),
                library_file: "libcuda.so.1".to_owned(),
            }
        );
        assert_eq!(
            expected(Api::Driver, f, 13020, None).outcomes,
            vec![Outcome::Ok]
        );
        let rt = Api::Runtime { major: 13 };
        let g = "cudaLaunchHostFunc_v2";
        assert_eq!(
            expected(rt, g, 13050, Some(13000)).outcomes,
            vec![Outcome::Unavailable {
                api: ErrorApi::Runtime { major: 13 },
                function: g.to_owned(),
                needs: RUNTIME_NEEDS,
                found: Some(13000),
                library_file: "libcudart.so.13".to_owned(),
            }]
        );
        // A 13.1 runtime has the driver's ABI version and still lacks the function.
        assert_eq!(
            expected(rt, g, 13050, Some(13010)).outcomes[0],
            Outcome::Unavailable {
                api: ErrorApi::Runtime { major: 13 },
                function: g.to_owned(),
                needs: RUNTIME_NEEDS,
                found: Some(13010),
                library_file: "libcudart.so.13".to_owned(),
            }
        );
        assert_eq!(
            expected(rt, g, 13050, Some(13050)).outcomes,
            vec![Outcome::Ok]
        );
        assert_eq!(expected(rt, g, 13000, Some(13050)).outcomes.len(), 2);
    }

    #[test]
    fn an_unavailable_error_is_reduced_to_its_fields() {
        let e = Error::Unavailable {
            api: ErrorApi::Driver,
            function: "cuLaunchHostFunc_v2",
            needs: NEEDS,
            found: Some(13000),
            library: "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        };
        assert_eq!(Outcome::of(&Err(e)), unavailable_driver());
    }

    fn seen(outcome: Outcome, calls: u64) -> Observation {
        Observation {
            api: Api::Driver,
            function: "cuLaunchHostFunc_v2",
            driver_version: 13000,
            runtime_version: None,
            modes: vec![ModeSeen {
                mode: "CU_HOST_TASK_BLOCKING",
                outcome,
                calls,
            }],
        }
    }

    #[test]
    fn the_old_driver_outcome_passes_and_a_run_on_it_is_reported() {
        let want = expected(Api::Driver, "cuLaunchHostFunc_v2", 13000, None);
        assert_eq!(check(&want, &seen(unavailable_driver(), 0)), Ok(()));
        assert_eq!(
            check(&want, &seen(Outcome::Ok, 1)).unwrap_err().to_string(),
            "cuLaunchHostFunc_v2 with CU_HOST_TASK_BLOCKING (driver 13000): expected \
             Unavailable { cuLaunchHostFunc_v2, driver, needs 13020, found Some(13000), in \
             libcuda.so.1 }, seen success; host-function calls with CU_HOST_TASK_BLOCKING: \
             expected 0, seen 1"
        );
    }

    #[test]
    fn a_wrong_found_version_is_reported() {
        let want = expected(Api::Driver, "cuLaunchHostFunc_v2", 13000, None);
        let mut other = unavailable_driver();
        if let Outcome::Unavailable { found, .. } = &mut other {
            *found = None;
        }
        assert!(check(&want, &seen(other, 0)).is_err());
    }
}
