//! The generator's integration tests, in one executable (`cargo test -p hostcb-generator --test
//! generator [FILTER]`): each module is one subject and says what it covers; `fuzz::` names the
//! fuzzing harness's tests, `inputs::` those of the input fetching, and so on.
//!
//! The tests share one process and run on parallel threads, so what belongs to the process is
//! settled here:
//!
//! - the environment is read once, by [`environment`], before any test can load libclang: the
//!   first load sets `LIBCLANG_PATH` for a moment (`Libclang::activate`), and a test that read
//!   the environment then would take the pinned library for the user's override;
//! - a process loads one libclang: the first test that reads headers loads the pinned one and
//!   every other reuses it. `libclang_once` checks that rule from a fresh process, a child of
//!   this executable that runs that test alone.

use std::path::Path;
use std::sync::OnceLock;

use hostcb_generator::config::{Config, Environment};

mod abi_versions;
mod diff;
mod fuzz;
mod generated;
mod inputs;
mod libclang_once;
mod runtime_minimums;
mod summaries;
mod templates;
// Shared with the xtask's tests, which include the same file.
mod wheels;

/// The workspace root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// This process's environment, read once: its libclang choice, and its input cache, or where
/// `HOSTCB_INPUTS_CACHE` is unset the tests' own (never the checkout's `target/hostcb-inputs`,
/// which another step may or may not have filled); the tests fetch what they read into it,
/// hash-checked.
fn environment() -> &'static Environment {
    static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| {
        let mut environment = Environment::of_process();
        environment
            .inputs_cache
            .get_or_insert_with(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostcb-inputs"));
        environment
    })
}

/// This checkout's configuration, with [`environment`].
fn config() -> Config {
    Config::load(root(), environment()).expect("the configuration")
}
