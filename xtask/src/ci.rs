//! `cargo xtask test`: everything CI checks, in one command: formatting, seals, stale output,
//! clippy, docs, the public API, every test of the workspace (GPU tests skip visibly without a
//! GPU), the concurrent protocols' models under loom, and the instruction budgets of the CPU
//! bench over the stub driver (bench/cpu/budgets.txt), the last two built in release.

use std::time::Instant;

use anyhow::bail;

/// One step: a name and the command line (run from the workspace root).
struct Step {
    name: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

const STEPS: &[Step] = &[
    Step {
        name: "format",
        args: &["fmt", "--all", "--check"],
        env: &[],
    },
    Step {
        name: "seals",
        args: &["xtask", "verify"],
        env: &[],
    },
    Step {
        name: "stale output",
        args: &["xtask", "check"],
        env: &[],
    },
    Step {
        name: "clippy",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step {
        name: "docs",
        args: &["doc", "--workspace", "--no-deps", "--all-features"],
        env: &[("RUSTDOCFLAGS", "-D warnings")],
    },
    // The public API of the crates users install against the last release's listing (api/), as
    // the version policy (docs/releases.md) allows.
    Step {
        name: "api",
        args: &["xtask", "api"],
        env: &[],
    },
    Step {
        name: "tests",
        // Every test binary, also after one fails, so that a red run shows every failure. The
        // loom models run in the next step (see xtask/src/loom.rs for why not here).
        args: &[
            "test",
            "--workspace",
            "--all-features",
            "--exclude",
            "hostcb-loom",
            "--no-fail-fast",
        ],
        env: &[],
    },
    // The concurrent protocols' models under loom (tests/loom), in release: seconds once built.
    Step {
        name: "loom",
        args: &["xtask", "loom"],
        env: &[],
    },
    // Exact instruction counts (callgrind) of the host-callback paths over the stub driver,
    // against bench/cpu/budgets.txt; a few seconds once the bench is built. Its own package
    // (hostcb-cpu-bench), so that this release build takes only what the CPU bench links, not
    // the GPU bench's library (hostcb-bench) with the test crate and clap.
    Step {
        name: "cpu budgets",
        args: &[
            "bench",
            "-p",
            "hostcb-cpu-bench",
            "--bench",
            "cpu",
            "--",
            "--check",
        ],
        env: &[],
    },
];

/// Runs every step, reports each, and fails if any failed.
pub fn run(root: &std::path::Path) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    let mut report = Vec::new();
    for step in STEPS {
        eprintln!("==> {}: cargo {}", step.name, step.args.join(" "));
        let started = Instant::now();
        let cpu_before = children_cpu_seconds();
        let status = crate::cargo()
            .args(step.args)
            .envs(step.env.iter().copied())
            .current_dir(root)
            .status();
        let ok = matches!(status, Ok(s) if s.success());
        report.push(format!(
            "{:<13} {:>7.1} s {:>7.1} s  {}",
            step.name,
            started.elapsed().as_secs_f64(),
            children_cpu_seconds() - cpu_before,
            if ok { "ok" } else { "FAILED" }
        ));
        if !ok {
            failed.push(step.name);
        }
    }
    eprintln!(
        "\n{:<13} {:>9} {:>9}\n{}",
        "step",
        "wall",
        "cpu",
        report.join("\n")
    );
    if !failed.is_empty() {
        bail!("failed steps: {}", failed.join(", "));
    }
    Ok(())
}

/// The user and system CPU time of every finished child process (and theirs) so far, in seconds:
/// what a step cost the machine, beside its wall time.
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one `rusage` into the zeroed value it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
