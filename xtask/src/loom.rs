//! `cargo xtask loom`: the model checks of the safe layer's and the loader's concurrent
//! protocols (`tests/loom`) under loom, with a preemption bound of one's choosing. It builds that
//! crate's tests with its feature `loom` in release, in the release tree the CPU bench builds too
//! (a feature, not a `--cfg` flag, which would need a tree of its own), and prints each model's
//! count of explored executions. `cargo xtask test` runs it, and leaves the crate out of its dev
//! test run: loom's dependencies there would change the features of the generator's (regex), so
//! that the dev build of `cargo xtask` and that of the tests could share nothing above them.

use anyhow::bail;

/// `cargo xtask loom` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// loom's preemption bound (`LOOM_MAX_PREEMPTIONS`): how many times a thread may be
    /// preempted in one execution. 3 explores every model in a few seconds (what `cargo xtask
    /// test` runs); each step up multiplies the executions, 5 takes minutes.
    #[arg(long, default_value_t = 3)]
    preemptions: u32,
    /// Only the models whose name contains this.
    filter: Option<String>,
}

/// Runs the models under loom.
pub fn run(root: &std::path::Path, args: Args) -> anyhow::Result<()> {
    let mut command = crate::cargo();
    command
        .args([
            "test",
            "--release",
            "-p",
            "hostcb-loom",
            "--features",
            "loom",
            "--lib",
            "--",
        ])
        .args(["--nocapture"])
        .args(args.filter)
        .env("LOOM_MAX_PREEMPTIONS", args.preemptions.to_string())
        .current_dir(root);
    eprintln!(
        "loom: the protocol models, preemption bound {}",
        args.preemptions
    );
    let status = command.status()?;
    if !status.success() {
        bail!(
            "a protocol model failed under loom: its assertion or loom's message is above \
             (loom's LOOM_CHECKPOINT_FILE, LOOM_LOCATION and LOOM_LOG replay and trace it)"
        );
    }
    Ok(())
}
