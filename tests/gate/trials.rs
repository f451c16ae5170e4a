//! The harness of every GPU test executable of the workspace (cargo feature `trials`), over
//! libtest-mimic (`harness = false`).
//!
//! An executable probes the GPU once ([`Gpu::probe`], or a probe of its own whose outcome it
//! turns into a [`Gate`] per trial), makes its trials ([`gpu_trial`] for a [`Case`] that takes
//! the device count, [`trial`] for any body with its gate) and hands them to [`run`], which
//! prints one `SKIP: <n> GPU tests: <reason>` or `FAIL: <n> GPU tests: <reason>` line per reason
//! and runs the trials one at a time unless `--test-threads` says otherwise: they share the GPU,
//! time host functions and wait for destructors.
//!
//! A trial whose gate is [`Gate::Skip`] is ignored (also under `--include-ignored`, with its
//! reason); one whose gate is [`Gate::Fail`] (`REQUIRE_GPU=1` and no usable GPU) fails with the
//! reason. A trial that runs in a child process (a context a trap poisons, a default-stream mode
//! fixed per process) runs this executable again with a variable set ([`run_child`]); the
//! executable's `main` looks for those variables before anything else. Checks obey the
//! wrong-expectations switch ([`crate::expect_eq`] and its siblings; their `String` errors turn
//! into [`Failed`] through `?`); callbacks only record, and every check runs on the test thread.

use std::collections::BTreeMap;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::{Gate, WRONG_EXPECTATIONS_ENV, gate, require_gpu, wrong_expectations};

/// What a trial's body returns: completed, ignored at run time with a reason (too few devices,
/// a library too old for a step), or failed.
pub type Outcome = Result<Completion, Failed>;

/// A GPU case, given the number of devices the probe found.
pub type Case = fn(usize) -> Outcome;

/// A completed case.
pub fn done() -> Outcome {
    Ok(Completion::Completed)
}

/// What the probe of a whole executable found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpu {
    /// Usable, with this many devices.
    Ready {
        /// Devices the driver reports (at least one).
        devices: usize,
    },
    /// Unusable: the trials are ignored, for this reason.
    Skip(String),
    /// Unusable while `REQUIRE_GPU=1`: the trials fail, for this reason.
    Fail(String),
}

impl Gpu {
    /// From a probe's outcome (the device count, or why none is usable) and whether
    /// `REQUIRE_GPU` is on ([`gate`]). No device is as good as no GPU.
    pub fn from_probe(probe: Result<usize, String>, require_gpu: bool) -> Gpu {
        let usable = match probe {
            Ok(0) => Err("the CUDA driver reports no device".to_owned()),
            other => other,
        };
        let devices = usable.as_ref().map_or(0, |&d| d);
        match gate(usable.map(drop), require_gpu) {
            Gate::Run => Gpu::Ready { devices },
            Gate::Skip(why) => Gpu::Skip(why),
            Gate::Fail(why) => Gpu::Fail(why),
        }
    }

    /// Probes the driver ([`crate::probe_gpu`]), then `prepare`s what the trials share (e.g.
    /// retained primary contexts) for the devices found; a failed preparation is as good as no
    /// GPU. A skip names the short reason, a failure the whole error.
    pub fn probe(prepare: impl FnOnce(usize) -> Result<(), String>) -> Gpu {
        match crate::probe_gpu() {
            Ok(gpu) => {
                let prepared = prepare(gpu.devices).map(|()| gpu.devices);
                Gpu::from_probe(prepared, require_gpu())
            }
            Err(u) if require_gpu() => {
                Gpu::from_probe(Err(format!("no usable GPU: {}", u.detail)), true)
            }
            Err(u) => Gpu::Skip(u.short),
        }
    }

    /// What each trial of this executable does.
    pub fn gate(&self) -> Gate {
        match self {
            Gpu::Ready { .. } => Gate::Run,
            Gpu::Skip(why) => Gate::Skip(why.clone()),
            Gpu::Fail(why) => Gate::Fail(why.clone()),
        }
    }

    /// Devices found, 0 without a usable GPU.
    pub fn devices(&self) -> usize {
        match self {
            Gpu::Ready { devices } => *devices,
            Gpu::Skip(_) | Gpu::Fail(_) => 0,
        }
    }
}

/// A trial with its gate, for [`run`].
#[derive(Debug)]
pub struct GpuTrial {
    gate: Gate,
    trial: Trial,
}

impl GpuTrial {
    /// Its name.
    pub fn name(&self) -> &str {
        self.trial.name()
    }

    /// Whether it runs.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
}

/// A trial that runs `body`, is ignored with the reason, or fails with it, as `gate` says.
pub fn trial(
    name: impl Into<String>,
    gate: Gate,
    body: impl FnOnce() -> Outcome + Send + 'static,
) -> GpuTrial {
    let name = name.into();
    let trial = match &gate {
        Gate::Run => Trial::ignorable_test(name, body),
        Gate::Skip(why) => {
            let why = why.clone();
            Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
                .with_ignored_flag(true)
        }
        Gate::Fail(why) => {
            let why = why.clone();
            Trial::test(name, move || Err(why.into()))
        }
    };
    GpuTrial { gate, trial }
}

/// The trial of a [`Case`], given the device count, as the probe says.
pub fn gpu_trial(gpu: &Gpu, name: impl Into<String>, case: Case) -> GpuTrial {
    let devices = gpu.devices();
    trial(name, gpu.gate(), move || case(devices))
}

/// One line per reason, skips first: `SKIP: <n> GPU tests: <reason>`, `FAIL: <n> GPU tests:
/// <reason>`.
pub fn summary<'a>(gates: impl IntoIterator<Item = &'a Gate>) -> Vec<String> {
    let mut skips: BTreeMap<&str, usize> = BTreeMap::new();
    let mut fails: BTreeMap<&str, usize> = BTreeMap::new();
    for gate in gates {
        match gate {
            Gate::Run => {}
            Gate::Skip(why) => *skips.entry(why).or_default() += 1,
            Gate::Fail(why) => *fails.entry(why).or_default() += 1,
        }
    }
    let skips = skips
        .into_iter()
        .map(|(why, n)| format!("SKIP: {n} GPU tests: {why}"));
    let fails = fails
        .into_iter()
        .map(|(why, n)| format!("FAIL: {n} GPU tests: {why}"));
    skips.chain(fails).collect()
}

/// The harness's `main`: prints `header` (what the probe found), the wrong-expectations notice
/// and the [`summary`] of the trials the arguments select, then runs them, one at a time unless
/// `--test-threads` says otherwise. With `--list` (as cargo-nextest asks each executable) it
/// prints the trials alone.
pub fn run(header: impl IntoIterator<Item = String>, trials: Vec<GpuTrial>) -> ExitCode {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    if !args.list {
        for line in header {
            println!("{line}");
        }
        if wrong_expectations() {
            println!(
                "{WRONG_EXPECTATIONS_ENV}=1: every check expects something wrong, so every trial \
                 that runs must fail"
            );
        }
        let selected = trials.iter().filter(|t| !args.is_filtered_out(&t.trial));
        for line in summary(selected.map(|t| &t.gate)) {
            println!("{line}");
        }
    }
    let trials = trials.into_iter().map(|t| t.trial).collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Polls `done` until it holds or `limit` passes; `false` if it never held.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    true
}

/// Waits up to `limit` for `counter` to reach `want`, then checks that it is exactly `want`
/// ([`crate::expect_eq`]).
pub fn wait_count(
    what: &str,
    counter: &AtomicUsize,
    want: usize,
    limit: Duration,
) -> Result<(), String> {
    wait_until(limit, || counter.load(Ordering::SeqCst) >= want);
    crate::expect_eq(
        &format!("{what} (after waiting up to {limit:?})"),
        want,
        counter.load(Ordering::SeqCst),
    )
}

/// What a child process of a trial left: its exit status, `None` if it ran past the limit and
/// was killed; its stdout and stderr.
#[derive(Debug)]
pub struct ChildRun {
    /// How it ended; `None`: killed at the limit.
    pub status: Option<ExitStatus>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl ChildRun {
    /// The `OBSERVED` line the child printed, split into its `key=value` pairs (`;` between).
    pub fn observed(&self) -> Option<BTreeMap<&str, &str>> {
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

/// Runs this test executable again as a trial's child, with each `(variable, value)` of `env`
/// set (`None`: removed), killing it after `limit`.
pub fn run_child(env: &[(&str, Option<&str>)], limit: Duration) -> Result<ChildRun, Failed> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut command = Command::new(exe);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the child: {e}"))?;
    // Drain both pipes while the child runs, so that a chatty child cannot block on a full one.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(ChildRun {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Reads a pipe to its end on a thread of its own.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Ends the process with a failure naming `what` unless dropped (disarmed) within `limit`: a
/// deadlock fails the test instead of hanging it.
#[derive(Debug)]
pub struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    /// Arms a watchdog for `what`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_gives_every_trial_its_gate_and_the_device_count() {
        assert_eq!(Gpu::from_probe(Ok(2), true), Gpu::Ready { devices: 2 });
        assert_eq!(Gpu::Ready { devices: 2 }.gate(), Gate::Run);
        assert_eq!(Gpu::Ready { devices: 2 }.devices(), 2);
        assert_eq!(
            Gpu::from_probe(Ok(0), false),
            Gpu::Skip("the CUDA driver reports no device".into())
        );
        let failed = Gpu::from_probe(Err("no CUDA driver".into()), true);
        assert_eq!(
            failed,
            Gpu::Fail("REQUIRE_GPU=1, and no CUDA driver".into())
        );
        assert_eq!(failed.devices(), 0);
    }

    #[test]
    fn one_summary_line_per_reason_skips_first() {
        let gates = [
            Gate::Run,
            Gate::Fail("REQUIRE_GPU=1, and no GPU".into()),
            Gate::Skip("needs 2 devices".into()),
            Gate::Skip("no CUDA 12 runtime".into()),
            Gate::Skip("needs 2 devices".into()),
        ];
        assert_eq!(
            summary(&gates),
            [
                "SKIP: 2 GPU tests: needs 2 devices",
                "SKIP: 1 GPU tests: no CUDA 12 runtime",
                "FAIL: 1 GPU tests: REQUIRE_GPU=1, and no GPU",
            ]
        );
    }

    #[test]
    fn skipped_trials_are_flagged_ignored_and_failing_ones_are_not() {
        fn never(_: usize) -> Outcome {
            Err("ran".into())
        }
        let skipped = gpu_trial(&Gpu::Skip("no GPU".into()), "a", never);
        assert!(skipped.trial.has_ignored_flag());
        assert_eq!(skipped.name(), "a");
        let failing = gpu_trial(&Gpu::Fail("REQUIRE_GPU=1, and no GPU".into()), "b", never);
        assert!(!failing.trial.has_ignored_flag());
        assert_eq!(
            failing.gate(),
            &Gate::Fail("REQUIRE_GPU=1, and no GPU".into())
        );
        let ready = gpu_trial(&Gpu::Ready { devices: 1 }, "c", never);
        assert!(!ready.trial.has_ignored_flag());
    }

    #[test]
    fn the_observed_line_is_read_into_pairs() {
        let run = ChildRun {
            status: None,
            stdout: "noise\nOBSERVED calls=3;drops=3;error=LAUNCH_FAILED\n".into(),
            stderr: String::new(),
        };
        let seen = run.observed().expect("an OBSERVED line");
        assert_eq!(seen.get("drops"), Some(&"3"));
        assert_eq!(seen.len(), 3);
    }
}
