//! Every generated entry point of every target resolves to the library export it names, in both
//! default-stream modes: `cuGetProcAddress` with the legacy version and flag must give the
//! address of the declared export (`cuMemcpyHtoD_v2`), and with the per-thread version and flag
//! the address of its `_ptsz`/`_ptds` twin (`cuMemcpyHtoD_v2_ptds`), as `dlsym` finds them. A
//! function the library does not export must come back as `Error::Unavailable`, never as some
//! other address.
//!
//! The default-stream mode is fixed once per process, so each trial (`<target>::entries::<mode>`,
//! in the test executable `gpu` beside the scenarios) runs that executable again as a child in
//! that mode (`HOSTCB_ENTRIES_CHILD=<target>`, which the harness's `main` looks for first) and
//! reads its verdict. Without a usable GPU the trials are skipped with the reason; with
//! `REQUIRE_GPU=1` they fail. With `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` each child expects the
//! other mode's exports, so every trial must fail.

use std::ffi::{CStr, c_void};
use std::process::ExitCode;
use std::time::Duration;

use cuda_hostcb::Error;
use cuda_hostcb::load::{DefaultStream, Entry, PER_THREAD_ENV, default_stream};
use hostcb_gate::trials::{self, Completion, Failed, GpuTrial};

use crate::binding::Api;
use crate::check::{WRONG_EXPECTATIONS_ENV, wrong_expectations};
use crate::probe::{Gate, Probe};

/// Set in a child: the target whose entry points it checks.
pub const CHILD_ENV: &str = "HOSTCB_ENTRIES_CHILD";

/// How long a child may take (it resolves one target's entry points, in seconds) before it is
/// killed and its trial fails.
const CHILD_LIMIT: Duration = Duration::from_secs(300);

/// One target's entry points.
struct Target {
    name: &'static str,
    driver: &'static [&'static dyn Entry],
    runtime: &'static [&'static dyn Entry],
    major: u32,
}

/// Every target of the generated crate (`cuda_hostcb::for_each_target!`).
fn targets() -> Vec<Target> {
    let mut targets = Vec::new();
    macro_rules! target {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            targets.push(Target {
                name: stringify!($target),
                driver: cuda_hostcb::$target::driver::entry::ALL,
                runtime: cuda_hostcb::$target::runtime::entry::ALL,
                major: $major,
            })
        };
    }
    cuda_hostcb::for_each_target!(target);
    targets
}

/// The trials, two per target (`cuda_hostcb::for_each_target!`): legacy and per-thread
/// default-stream mode, gated on the driver, then the target's runtime.
pub fn trials(probe: &Probe) -> Vec<GpuTrial> {
    let mut out = Vec::new();
    for target in targets() {
        let gate = match probe.gate(Api::Driver) {
            Gate::Run => probe.gate(Api::Runtime {
                major: target.major,
            }),
            other => other,
        };
        for mode in [DefaultStream::Legacy, DefaultStream::PerThread] {
            let name = format!("{}::entries::{}", target.name, mode_name(mode));
            let target = target.name;
            out.push(trials::trial(name, gate.clone(), move || {
                run_child(target, mode).map(|()| Completion::Completed)
            }));
        }
    }
    out
}

fn mode_name(mode: DefaultStream) -> &'static str {
    match mode {
        DefaultStream::Legacy => "legacy",
        DefaultStream::PerThread => "per_thread",
    }
}

/// Runs this executable as a child that checks `target` in `mode`; passes on its exit status and
/// prints its summary.
fn run_child(target: &str, mode: DefaultStream) -> Result<(), Failed> {
    let per_thread = match mode {
        DefaultStream::PerThread => Some("1"),
        DefaultStream::Legacy => None,
    };
    let run = trials::run_child(
        &[(CHILD_ENV, Some(target)), (PER_THREAD_ENV, per_thread)],
        CHILD_LIMIT,
    )?;
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    match run.status {
        Some(status) if status.success() => {
            for line in stdout.lines().filter(|l| l.starts_with("entries ")) {
                println!("{line}");
            }
            Ok(())
        }
        Some(status) => Err(format!("{status}{stdout}{stderr}").into()),
        None => Err(format!(
            "the child ran past {CHILD_LIMIT:?} and was killed:\n{stdout}{stderr}"
        )
        .into()),
    }
}

/// The library the loader opens for `api`, opened again for `dlsym` (the loader keeps its copy
/// open, so this is the same object when the same file is found).
fn open(api: Api) -> Result<libloading::Library, String> {
    let (vars, soname) = match api {
        Api::Driver => (
            vec!["CUDA_HOSTCB_LIBCUDA".to_owned()],
            "libcuda.so.1".to_owned(),
        ),
        Api::Runtime { major } => (
            vec![
                format!("CUDA_HOSTCB_LIBCUDART_{major}"),
                "CUDA_HOSTCB_LIBCUDART".to_owned(),
            ],
            format!("libcudart.so.{major}"),
        ),
    };
    let file = vars
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()))
        .unwrap_or(soname);
    // SAFETY: the CUDA libraries' initialisers are safe to run; the loader has run them already.
    unsafe { libloading::Library::new(&file) }.map_err(|e| format!("{file}: {e}"))
}

fn exported(lib: &libloading::Library, symbol: &CStr) -> Option<*const c_void> {
    // SAFETY: only the address is read.
    unsafe { lib.get::<*const c_void>(symbol) }
        .ok()
        .map(|s| *s)
        .filter(|p| !p.is_null())
}

/// Checks one API's entry points; returns (resolved, unavailable names, mismatches).
fn check(
    entries: &'static [&'static dyn Entry],
    api: Api,
    mode: DefaultStream,
) -> (usize, Vec<&'static str>, Vec<String>) {
    let expected_mode = match (mode, wrong_expectations()) {
        (m, false) => m,
        (DefaultStream::Legacy, true) => DefaultStream::PerThread,
        (DefaultStream::PerThread, true) => DefaultStream::Legacy,
    };
    let mut resolved = 0;
    let mut unavailable = Vec::new();
    let mut mismatches = Vec::new();
    // Resolve one entry first, so the loader has opened the library before it is opened here.
    let _ = entries.first().map(|e| e.address());
    let lib = match open(api) {
        Ok(lib) => lib,
        Err(e) => {
            return (
                0,
                unavailable,
                vec![format!("cannot open the library: {e}")],
            );
        }
    };
    for entry in entries {
        let export = entry.export(expected_mode);
        let want = exported(&lib, export);
        match (entry.address(), want) {
            (Ok(got), Some(want)) if got == want => resolved += 1,
            (Err(Error::Unavailable { .. }), None) => unavailable.push(entry.name()),
            (got, want) => mismatches.push(format!(
                "{}: resolved to {got:?}, but dlsym({}) is {want:?}",
                entry.name(),
                export.to_string_lossy()
            )),
        }
    }
    (resolved, unavailable, mismatches)
}

/// The child: checks every entry point of one target in the mode the environment selects.
pub fn child(target: &str) -> ExitCode {
    let Some(target) = targets().into_iter().find(|t| t.name == target) else {
        eprintln!("{CHILD_ENV}={target}: no such target");
        return ExitCode::FAILURE;
    };
    let mode = default_stream();
    let mut failed = false;
    for (api, entries) in [
        (Api::Driver, target.driver),
        (
            Api::Runtime {
                major: target.major,
            },
            target.runtime,
        ),
    ] {
        let (resolved, unavailable, mismatches) = check(entries, api, mode);
        let api_name = api.module();
        println!(
            "entries {} {api_name} {}: {resolved} of {} resolved to their exports, {} unavailable ({})",
            target.name,
            mode_name(mode),
            entries.len(),
            unavailable.len(),
            unavailable.join(", ")
        );
        for m in &mismatches {
            println!("MISMATCH {m}");
        }
        failed |= !mismatches.is_empty();
        if resolved == 0 {
            println!("MISMATCH no {api_name} entry point resolved at all");
            failed = true;
        }
    }
    if wrong_expectations() {
        println!("({WRONG_EXPECTATIONS_ENV}=1: expected the other mode's exports)");
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostcb_gate::{Gpu, Unusable};

    fn probe(gpu: bool, runtime_12: bool) -> Probe {
        let missing = || Error::LibraryNotFound {
            library: "libcudart.so.12",
            searched: Vec::leak(vec!["libcudart.so.12: not found".to_owned()]),
        };
        Probe {
            require_gpu: false,
            gpu: if gpu {
                Ok(Gpu {
                    devices: 1,
                    driver_version: Some(13000),
                })
            } else {
                Err(Unusable {
                    short: "no CUDA driver".to_owned(),
                    detail: "could not load libcuda.so.1".to_owned(),
                })
            },
            runtimes: vec![
                (
                    12,
                    if runtime_12 {
                        Ok(12090)
                    } else {
                        Err(missing())
                    },
                ),
                (13, Ok(13000)),
            ],
        }
    }

    #[test]
    fn two_trials_per_target_gated_on_the_driver_then_its_runtime() {
        let all = trials(&probe(true, false));
        let names: Vec<&str> = all.iter().map(GpuTrial::name).collect();
        assert_eq!(names.len(), 2 * targets().len());
        for target in targets() {
            for mode in ["legacy", "per_thread"] {
                let name = format!("{}::entries::{mode}", target.name);
                let trial = all
                    .iter()
                    .find(|t| t.name() == name)
                    .unwrap_or_else(|| panic!("{name} missing"));
                match target.major {
                    12 => assert!(matches!(trial.gate(), Gate::Skip(_)), "{name}"),
                    _ => assert_eq!(trial.gate(), &Gate::Run, "{name}"),
                }
            }
        }
        let none = trials(&probe(false, true));
        assert!(
            none.iter()
                .all(|t| t.gate() == &Gate::Skip("no CUDA driver".to_owned()))
        );
    }
}
