//! What the examples in `examples/` share: [`run`] finds a usable GPU through the 13.5 driver
//! bindings, or skips visibly (fails with `REQUIRE_GPU=1`), runs the example, and reports its
//! result; [`expect`] compares what a host function recorded with what it should have.

use std::error::Error;
use std::fmt::Debug;
use std::process::ExitCode;

use cuda_hostcb::ctk_13_5::driver as cu;

/// What an example returns: a line saying what it did, or why it failed.
pub type Outcome = Result<String, Box<dyn Error>>;

/// Runs the example `name` if a CUDA driver and device are usable: prints `<name>: <line>` and
/// succeeds, or prints `error: <name>: <why>` and fails. Without a GPU it prints
/// `SKIP: <name>: <reason>` and succeeds, unless `REQUIRE_GPU=1`, where it fails.
pub fn run(name: &str, example: impl FnOnce() -> Outcome) -> ExitCode {
    if let Err((short, detail)) = usable_gpu() {
        if std::env::var_os("REQUIRE_GPU").is_some_and(|v| v == "1") {
            eprintln!("error: {name}: REQUIRE_GPU=1, and no usable GPU: {detail}");
            return ExitCode::FAILURE;
        }
        println!("SKIP: {name}: {short}");
        return ExitCode::SUCCESS;
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

/// `Ok(())` if `seen` is `expected`, else an error naming `what` and both values.
pub fn expect<T: PartialEq + Debug>(what: &str, expected: T, seen: T) -> Result<(), String> {
    if seen == expected {
        Ok(())
    } else {
        Err(format!("{what}: expected {expected:?}, seen {seen:?}"))
    }
}

/// `cuInit(0)` and at least one device, or a short reason and the whole error.
fn usable_gpu() -> Result<(), (String, String)> {
    let mut count = 0;
    // SAFETY: plain calls; `count` is valid for writes.
    let found = unsafe { cu::cuInit(0).and_then(|()| cu::cuDeviceGetCount(&mut count)) };
    match found {
        Ok(()) if count > 0 => Ok(()),
        Ok(()) => Err((
            "no CUDA device".to_owned(),
            "cuDeviceGetCount reports 0 devices".to_owned(),
        )),
        Err(e) => {
            let short = match &e {
                cuda_hostcb::Error::LibraryNotFound { library, .. } => {
                    format!("no CUDA driver ({library} not found)")
                }
                other => other.to_string(),
            };
            Err((short, e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::expect;

    #[test]
    fn expect_names_what_differs_with_both_values() {
        assert_eq!(expect("host function calls", 10, 10), Ok(()));
        assert_eq!(
            expect("host function calls", 11, 10),
            Err("host function calls: expected 11, seen 10".to_owned())
        );
    }
}

/// The README's Rust blocks, compiled as doctests of this crate (`cargo test --doc`) so that they
/// stay true as written.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
