//! What the `sticky` and `reaper` GPU tests share: the GPU probe and trials, checks
//! that obey `HOSTCB_TESTS_WRONG_EXPECTATIONS`, a watchdog, and the harness's `main`.
//!
//! The GPU is probed once at start-up. When it is unusable each GPU trial is ignored,
//! with one `SKIP:` line that gives the count and the reason; with `REQUIRE_GPU=1` the trials
//! fail instead. Callbacks and drops only record; every check runs on the test thread.

#![allow(dead_code, reason = "each test uses its own part")]

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// What the GPU probe found.
pub enum Gpu {
    Ready,
    Skip(String),
    Fail(String),
}

impl Gpu {
    pub fn from_probe(probe: Result<usize, String>, require: bool) -> Gpu {
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

pub type Outcome = Result<Completion, Failed>;
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

pub fn done() -> Outcome {
    Ok(Completion::Completed)
}

pub const WRONG_EXPECTATIONS_ENV: &str = "HOSTCB_TESTS_WRONG_EXPECTATIONS";

fn wrong() -> bool {
    hostcb_gate::wrong_expectations()
}

/// Checks `got == want` (with wrong expectations on: that they differ).
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

/// Checks that `holds` (with wrong expectations on: that it does not), describing `seen`.
pub fn expect_that(what: &str, holds: bool, seen: impl Debug) -> Result<(), Failed> {
    match (holds, wrong()) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(format!("{what}: does not hold; seen {seen:?}").into()),
        (true, true) => Err(format!(
            "{what}: holds (seen {seen:?}), and {WRONG_EXPECTATIONS_ENV}=1 wanted it not to"
        )
        .into()),
    }
}

/// Polls `done` until it holds or `limit` passes; `false` if it never held.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// What a child process of a trial left: its exit status, `None` if it ran past the limit and
/// was killed; its stdout and stderr.
pub struct ChildRun {
    pub status: Option<std::process::ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl ChildRun {
    /// The `OBSERVED` line the child printed, split into its `key=value` pairs (`;` between).
    pub fn observed(&self) -> Option<std::collections::BTreeMap<&str, &str>> {
        let line = self
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("OBSERVED "))?;
        Some(
            line.split(';')
                .filter_map(|kv| kv.split_once('='))
                .collect(),
        )
    }
}

/// Runs this test executable again with `env=value` (a trial's child), killing it after
/// `limit`.
pub fn run_child(env: &str, value: &str, limit: Duration) -> Result<ChildRun, Failed> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe()?)
        .env(env, value)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output()?;
    Ok(ChildRun {
        status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Ends the process with a failure naming `what` unless disarmed within `limit`: a deadlock
/// fails the test instead of hanging it.
pub struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    pub fn arm(what: String, limit: Duration) -> Watchdog {
        let disarmed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&disarmed);
        std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < limit {
                if flag.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!("watchdog: {what} did not finish within {limit:?} (a deadlock or a hang)");
            std::process::exit(101);
        });
        Watchdog(disarmed)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The harness: makes the trials (`make`) from what the GPU probe found (`probe`), prints one
/// `SKIP:` line for the ignored ones, and runs them one at a time unless told otherwise.
pub fn run(probe: Result<usize, String>, make: fn(&Gpu) -> Vec<Trial>) -> ! {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let require = hostcb_gate::require_gpu();
    // Listing (`--list`, as cargo-nextest asks each binary) prints the trials alone on stdout.
    let list = args.list;
    let gpu = Gpu::from_probe(probe, require);
    let trials = make(&gpu);
    if !list {
        match &gpu {
            Gpu::Ready => println!("GPU: usable"),
            Gpu::Skip(reason) => println!("SKIP: {} GPU tests ({reason})", trials.len()),
            Gpu::Fail(reason) => println!("FAIL: REQUIRE_GPU=1 and {reason}"),
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
