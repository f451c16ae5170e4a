//! What the examples in `examples/` share: the bindings of the newest target ([`newest`]);
//! [`run`], which finds a usable GPU ([`hostcb_gate::probe_gpu`]) or skips
//! visibly (fails with `REQUIRE_GPU=1`), runs the example, and reports its result; and
//! [`expect`], which compares what a host function recorded with what it should have (the other
//! way round with `HOSTCB_TESTS_WRONG_EXPECTATIONS=1`, to see every example's check fail).

use std::error::Error;
use std::fmt::Debug;
use std::process::ExitCode;

use hostcb_gate::Gate;

/// The newest target's modules, whichever the target list makes newest: the examples name no
/// target. A program of yours names its own, e.g. `use cuda_hostcb::ctk_<major>_<minor>::driver`
/// (the safe layer, `cuda_hostcb_safe`, has no module per target).
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        #[doc = concat!("The bindings of the newest target, CTK ", $version, ".")]
        pub use cuda_hostcb::$target as newest;
    };
}
cuda_hostcb::newest_target!(newest);

/// What an example returns: a line saying what it did, or why it failed.
pub type Outcome = Result<String, Box<dyn Error>>;

/// Runs the example `name` if a CUDA driver and device are usable: prints `<name>: <line>` and
/// succeeds, or prints `error: <name>: <why>` and fails. Without a GPU it prints
/// `SKIP: <name>: <reason>` and succeeds, unless `REQUIRE_GPU=1`, where it fails.
pub fn run(name: &str, example: impl FnOnce() -> Outcome) -> ExitCode {
    // cargo-nextest first lists each test binary's tests (`--list --format terse`, and the
    // ignored ones with `--ignored`), then runs each in a process of its own: an example is one
    // test, named after it, and never ignored.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let gpu = hostcb_gate::probe_gpu();
    let usable = gpu
        .as_ref()
        .map(|_| ())
        .map_err(|u| format!("no usable GPU: {}", u.detail));
    match hostcb_gate::gate(usable, hostcb_gate::require_gpu()) {
        Gate::Run => {}
        Gate::Skip(_) => {
            let short = gpu.err().map(|u| u.short).unwrap_or_default();
            println!("SKIP: {name}: {short}");
            return ExitCode::SUCCESS;
        }
        Gate::Fail(why) => {
            eprintln!("error: {name}: {why}");
            return ExitCode::FAILURE;
        }
    }
    match example() {
        Ok(line) => {
            println!("{name}: {line}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("error: {name}: {why}");
            ExitCode::FAILURE
        }
    }
}

/// `Ok(())` if `seen` is `expected`, else an error naming `what` and both values; with
/// `HOSTCB_TESTS_WRONG_EXPECTATIONS=1`, the other way round ([`hostcb_gate::expect_eq`]).
pub fn expect<T: PartialEq + Debug>(what: &str, expected: T, seen: T) -> Result<(), String> {
    hostcb_gate::expect_eq(what, expected, seen)
}

#[cfg(test)]
mod tests {
    use super::expect;

    #[test]
    fn expect_names_what_differs_with_both_values() {
        if hostcb_gate::wrong_expectations() {
            // The switch turns every check round: equal values are now the failure.
            assert!(expect("host function calls", 10, 10).is_err());
            assert_eq!(expect("host function calls", 11, 10), Ok(()));
        } else {
            assert_eq!(expect("host function calls", 10, 10), Ok(()));
            assert_eq!(
                expect("host function calls", 11, 10),
                Err("host function calls: expected 11, seen 10".to_owned())
            );
        }
    }
}

/// The README's Rust blocks, compiled as doctests of this crate (`cargo test --doc`) so that they
/// stay true as written.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The Rust blocks of the guide's page on the safe layer and interop, compiled the same way.
#[cfg(doctest)]
#[doc = include_str!("../../docs/safe-layer.md")]
pub struct SafeLayerGuideDoctests;
