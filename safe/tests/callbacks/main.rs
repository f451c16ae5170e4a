//! GPU tests of the safe layer's executable-node updates, host sync modes, borrowed contexts and
//! graphs, and completion futures, with their own harness.
//!
//! The GPU is probed once at start-up. When it is unusable each GPU trial is
//! ignored, with one `SKIP:` line that gives the count and the reason; with `REQUIRE_GPU=1` the
//! trials fail instead. Trials run one at a time unless `--test-threads` says otherwise.
//! Callbacks only record; every check runs on the test thread after synchronising.
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` inverts every check, so each trial must fail at its first
//! one: the way to see on a GPU that the checks can fail.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

mod cases;

/// Whether the headers the safe layer is compiled over (the newest target's) declare host sync
/// modes, and their CTK version.
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        const HOST_FUNC_V2: bool = has_host_func_v2!([$($capability)*]);
        const VERSION: &str = $version;
    };
}

/// `true` if the capability list holds `host_func_v2`.
macro_rules! has_host_func_v2 {
    ([]) => {
        false
    };
    ([host_func_v2 $($rest:ident)*]) => {
        true
    };
    ([$other:ident $($rest:ident)*]) => {
        has_host_func_v2!([$($rest)*])
    };
}

cuda_hostcb::newest_target!(newest);

/// What the GPU probe found.
pub enum Gpu {
    /// Usable, with this many devices.
    Ready,
    /// Unusable: the trials are ignored.
    Skip(String),
    /// Unusable while `REQUIRE_GPU=1`: the trials fail with this reason.
    Fail(String),
}

impl Gpu {
    fn from_probe(probe: Result<usize, String>, require: bool) -> Gpu {
        let reason = match probe {
            Ok(0) => "the CUDA driver reports no device".to_owned(),
            Ok(_) => return Gpu::Ready,
            Err(reason) => reason,
        };
        if require {
            Gpu::Fail(reason)
        } else {
            Gpu::Skip(reason)
        }
    }
}

/// What a GPU case returns.
pub type Outcome = Result<Completion, Failed>;

/// A GPU case.
pub type Case = fn() -> Outcome;

/// One trial, run, ignored or failed as the probe says.
pub fn gpu_trial(gpu: &Gpu, name: &str, case: Case) -> Trial {
    let name = name.to_owned();
    match gpu {
        Gpu::Ready => Trial::ignorable_test(name, case),
        Gpu::Skip(_) => Trial::test(name, || Ok(())).with_ignored_flag(true),
        Gpu::Fail(reason) => {
            let reason = reason.clone();
            Trial::test(name, move || {
                Err(format!("REQUIRE_GPU=1, but no GPU is usable: {reason}").into())
            })
        }
    }
}

/// A completed case.
pub fn done() -> Outcome {
    Ok(Completion::Completed)
}

/// The variable that inverts every check.
pub const WRONG_EXPECTATIONS_ENV: &str = "HOSTCB_TESTS_WRONG_EXPECTATIONS";

fn wrong() -> bool {
    hostcb_gate::wrong_expectations()
}

/// Checks `got == want`.
pub fn expect_eq<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Result<(), Failed> {
    match (got == want, wrong()) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(format!("{what}: got {got:?}, want {want:?}").into()),
        (true, true) => Err(format!(
            "{what}: got {got:?}, and {WRONG_EXPECTATIONS_ENV}=1 wanted anything else"
        )
        .into()),
    }
}

/// Checks `got <= most`.
pub fn expect_at_most(what: &str, got: usize, most: usize) -> Result<(), Failed> {
    match (got <= most, wrong()) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(format!("{what}: got {got}, want at most {most}").into()),
        (true, true) => Err(format!(
            "{what}: got {got} (at most {most}), and {WRONG_EXPECTATIONS_ENV}=1 wanted more"
        )
        .into()),
    }
}

/// Checks that two long sequences are equal, naming the first difference.
pub fn expect_seq<T: PartialEq + Debug>(what: &str, got: &[T], want: &[T]) -> Result<(), Failed> {
    let equal = got == want;
    if equal != wrong() {
        return Ok(());
    }
    if equal {
        return Err(format!(
            "{what}: {} items as wanted, and {WRONG_EXPECTATIONS_ENV}=1 wanted anything else",
            got.len()
        )
        .into());
    }
    let first = got.iter().zip(want).position(|(g, w)| g != w);
    Err(match first {
        Some(i) => format!(
            "{what}: item {i} is {:?}, want {:?} ({} items, want {})",
            got[i],
            want[i],
            got.len(),
            want.len()
        ),
        None => format!("{what}: {} items, want {}", got.len(), want.len()),
    }
    .into())
}

/// How long to wait for what CUDA does asynchronously (user-object destructors, a gate).
pub const WAIT: Duration = Duration::from_secs(30);

/// Waits up to [`WAIT`] until `done()` holds; an error naming `what` if it never does (the
/// watchdog: no case waits forever).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), Failed> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > WAIT {
            return Err(format!("watchdog: {what} did not happen within {WAIT:?}").into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Waits up to [`WAIT`] for `counter` to reach `want`, then checks it is exactly `want`.
pub fn wait_count(what: &str, counter: &AtomicUsize, want: usize) -> Result<(), Failed> {
    let start = Instant::now();
    while counter.load(Ordering::SeqCst) < want && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    expect_eq(
        &format!("{what} (after waiting up to {WAIT:?})"),
        counter.load(Ordering::SeqCst),
        want,
    )
}

/// A shared counter.
pub fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// Counts its drops into a shared counter.
pub struct Tally(pub Arc<AtomicUsize>);

impl Drop for Tally {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Appends to a shared log from a callback (never panics on a poisoned lock).
pub fn record<T>(log: &Mutex<Vec<T>>, item: T) {
    log.lock().unwrap_or_else(|e| e.into_inner()).push(item);
}

/// Takes a shared log's items.
pub fn take<T>(log: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()))
}

fn main() {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let require = hostcb_gate::require_gpu();
    // Listing (`--list`, as cargo-nextest asks each binary) prints the trials alone on stdout.
    let list = args.list;

    let gpu = Gpu::from_probe(cases::probe(), require);
    let trials = cases::trials(&gpu);
    if !list {
        match &gpu {
            Gpu::Ready => println!("GPU: usable"),
            Gpu::Skip(reason) => println!("SKIP: {} GPU tests ({reason})", trials.len()),
            Gpu::Fail(reason) => println!("FAIL: REQUIRE_GPU=1 and {reason}"),
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
