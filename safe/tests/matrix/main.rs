//! The safe layer's GPU matrix (C01-C14 of its issue, plus the raw path and the refusals), on
//! real GPUs, with its own harness.
//!
//! The GPU is probed once at start-up. When it is unusable each GPU trial is
//! ignored, with one `SKIP:` line that gives the count and the reason; with `REQUIRE_GPU=1` the
//! trials fail instead. Trials run one at a time unless `--test-threads` says otherwise: a
//! global-mode capture (C13) forbids other threads' unsafe CUDA calls while it lasts.
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` (the workspace's one switch, `hostcb_gate`) inverts every
//! check, so each trial must fail at its first one: the way to see on a GPU that the checks can
//! fail. `REQUIRE_GPU` is read through `hostcb_gate` too.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuda_hostcb_safe::{default_panic_hook, set_panic_hook};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

mod cases;

/// What the GPU probe found.
pub enum Gpu {
    /// Usable, with this many devices.
    Ready { devices: usize },
    /// Unusable: the trials are ignored.
    Skip(String),
    /// Unusable while `REQUIRE_GPU=1`: the trials fail with this reason.
    Fail(String),
}

impl Gpu {
    fn from_probe(probe: Result<usize, String>, require: bool) -> Gpu {
        let reason = match probe {
            Ok(0) => "the CUDA driver reports no device".to_owned(),
            Ok(devices) => return Gpu::Ready { devices },
            Err(reason) => reason,
        };
        if require {
            Gpu::Fail(reason)
        } else {
            Gpu::Skip(reason)
        }
    }
}

/// What a GPU case returns: completed, or ignored at run time with a reason (too few devices).
pub type Outcome = Result<Completion, Failed>;

/// A GPU case, given the device count.
pub type Case = fn(usize) -> Outcome;

/// One trial, run, ignored or failed as the probe says.
pub fn gpu_trial(gpu: &Gpu, name: &str, case: Case) -> Trial {
    let name = name.to_owned();
    match gpu {
        Gpu::Ready { devices } => {
            let devices = *devices;
            Trial::ignorable_test(name, move || case(devices))
        }
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

fn wrong() -> bool {
    hostcb_gate::wrong_expectations()
}

/// Checks `got == want`.
pub fn expect_eq<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Result<(), Failed> {
    match (got == want, wrong()) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(format!("{what}: got {got:?}, want {want:?}").into()),
        (true, true) => Err(format!(
            "{what}: got {got:?}, and HOSTCB_TESTS_WRONG_EXPECTATIONS=1 wanted anything else"
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
            "{what}: {} items as wanted, and HOSTCB_TESTS_WRONG_EXPECTATIONS=1 wanted anything else",
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

/// How long to wait for a closure that CUDA drops asynchronously (user-object destructors).
pub const DROP_WAIT: Duration = Duration::from_secs(5);

/// Waits up to `timeout` for `counter` to reach `want`, then checks it is exactly `want`.
pub fn wait_count(
    what: &str,
    counter: &AtomicUsize,
    want: usize,
    timeout: Duration,
) -> Result<(), Failed> {
    let start = Instant::now();
    while counter.load(Ordering::SeqCst) < want && start.elapsed() < timeout {
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = counter.load(Ordering::SeqCst);
    expect_eq(
        &format!("{what} (after waiting up to {timeout:?})"),
        got,
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

/// A host pointer that callbacks may read or write (the test keeps it valid and synchronises).
#[derive(Clone, Copy)]
pub struct HostPtr(pub *mut u32);

// SAFETY: the cases keep the memory alive until the callbacks that use it have run, and never
// touch it from two threads at once.
unsafe impl Send for HostPtr {}
// SAFETY: as above.
unsafe impl Sync for HostPtr {}

impl HostPtr {
    /// The pointer (a method, so closures capture the whole `HostPtr`).
    pub fn get(self) -> *mut u32 {
        self.0
    }
}

/// Every contained callback panic's message, as the hook received it.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How many contained panics carried exactly `message`.
pub fn panics_with(message: &str) -> usize {
    PANICS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|m| *m == message)
        .count()
}

fn main() {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let require = hostcb_gate::require_gpu();
    // Listing (`--list`, as cargo-nextest asks each binary) prints the trials alone on stdout.
    let list = args.list;

    // One recording hook for the whole run (the hook is process-wide); it also prints.
    set_panic_hook(|report| {
        record(&PANICS, report.message().unwrap_or_default().to_owned());
        default_panic_hook(report);
    });

    let gpu = Gpu::from_probe(cases::probe(), require);
    let trials = cases::trials(&gpu);
    if !list {
        match &gpu {
            Gpu::Ready { devices } => println!("GPU: {devices} device(s)"),
            Gpu::Skip(reason) => println!("SKIP: {} GPU tests ({reason})", trials.len()),
            Gpu::Fail(reason) => println!("FAIL: REQUIRE_GPU=1 and {reason}"),
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
