//! The safe layer's GPU tests, one executable (`safe`) with the workspace's one harness
//! ([`hostcb_gate::trials`]); each trial is named `<module>::<case>`:
//!
//! - `matrix`: C01-C14, one callback on one stream up to every device with two graphs each,
//!   plus the raw path and the refusals;
//! - `callbacks`: executable-node updates, host sync modes, borrowed contexts and graphs,
//!   completion futures;
//! - `reaper`: drops off CUDA's threads (closures owning device memory, freed on the reaper
//!   thread), buffers a graph keeps, handles dropped in a callback before the last context;
//! - `sticky`: a kernel that traps, in a child process, with closures before and after it.
//!
//! The GPU is probed once at start-up, and the primary context of every device is retained for
//! the whole run, so that the cases do not create and reset them again and again (a device
//! that cannot give one is as good as none). When the GPU is unusable each trial is ignored,
//! with one `SKIP:` line that gives the count and the reason; with `REQUIRE_GPU=1` the trials
//! fail instead. Trials run one at a time unless `--test-threads` says otherwise. Callbacks
//! and drops only record; every check runs on the test thread after synchronising.
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` (the workspace's one switch, `hostcb_gate`) inverts every
//! check, so each trial must fail at its first one: the way to see on a GPU that the checks can
//! fail.
//!
//! The `sticky` trial and the `reaper::teardown_*` trials run this executable again as a child
//! (`HOSTCB_STICKY_CHILD`, `HOSTCB_TEARDOWN_CHILD`): `main` looks for those variables first.
//!
//! `cargo test -p cuda-hostcb-safe --test safe -- sticky::` runs one module's trials.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cuda_hostcb_safe as safe;
use hostcb_gate::trials::{self, Gpu, gpu_trial};

mod callbacks;
mod matrix;
mod reaper;
mod sticky;

/// The primary contexts of every device, retained for the whole run.
static CONTEXTS: OnceLock<Vec<safe::Context>> = OnceLock::new();

/// Retains the primary context of each of the `devices` the probe found.
fn retain_contexts(devices: usize) -> Result<(), String> {
    let contexts = (0..devices)
        .map(safe::Context::primary)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no primary context: {e}"))?;
    let _ = CONTEXTS.set(contexts);
    Ok(())
}

fn main() -> ExitCode {
    // A trial's child does its part and exits, before any probe or hook.
    if std::env::var_os(sticky::CHILD_ENV).is_some() {
        sticky::child();
    }
    if let Ok(kind) = std::env::var(reaper::teardown::CHILD_ENV) {
        reaper::teardown::child(&kind);
    }
    matrix::record_panics();

    let gpu = Gpu::probe(retain_contexts);
    let modules = [
        ("matrix", matrix::cases()),
        ("callbacks", callbacks::cases()),
        ("reaper", reaper::cases()),
        ("sticky", sticky::cases()),
    ];
    let trials = modules
        .into_iter()
        .flat_map(|(module, cases)| {
            let gpu = &gpu;
            cases
                .into_iter()
                .map(move |(case, run)| gpu_trial(gpu, format!("{module}::{case}"), run))
        })
        .collect();
    let header = match gpu {
        Gpu::Ready { devices } => vec![format!("cuda-hostcb-safe: {devices} CUDA device(s)")],
        Gpu::Skip(_) | Gpu::Fail(_) => Vec::new(),
    };
    trials::run(header, trials)
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
