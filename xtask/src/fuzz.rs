//! `cargo xtask fuzz`: the long run of the fuzzing harness (the `fuzz::` tests of the
//! generator's test executable, `generator/tests/generator/fuzz.rs`), which `cargo test` runs
//! short. Each target runs for `--seconds`, one after the other, from a fresh seed (printed, to
//! repeat a run with `--seed`), in a release build; each prints its cases per second and its
//! findings.

use anyhow::bail;

/// `cargo xtask fuzz` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Seconds per target (6 targets).
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// The seed (default: one drawn from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
}

/// Runs the harness's tests in release mode with the run's length and seed.
pub fn run(root: &std::path::Path, args: Args) -> anyhow::Result<()> {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        bail!(
            "--seconds must be a positive number of seconds, not {}",
            args.seconds
        );
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!(
        "fuzz: {} s per target, seed {seed} (repeat with --seed {seed})",
        args.seconds
    );
    let status = crate::cargo()
        .args([
            "test",
            "--release",
            "-p",
            "hostcb-generator",
            "--test",
            "generator",
            "--",
            "fuzz::",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HOSTCB_FUZZ_SECONDS", args.seconds.to_string())
        .env("HOSTCB_FUZZ_SEED", seed.to_string())
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!(
            "the fuzzing run failed (seed {seed}); the findings are named above, each input under target/tmp/fuzz-findings/"
        );
    }
    Ok(())
}
