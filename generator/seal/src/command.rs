//! The `verify` command as both `cargo xtask verify` and the `hostcb-seal` binary run it: the
//! report and the time it took on standard error, and one error when any file failed.

use std::io::{self, Write};
use std::time::Instant;

use crate::report::{VerifyError, VerifyOptions, VerifyReport, VerifyRoot};
use crate::verify::verify_roots;

/// Why a verify command fails.
#[derive(Debug)]
pub enum CommandError {
    /// Verification could not run to the end.
    Verify(VerifyError),
    /// Verification ran and some files failed; each was listed in the report.
    Failed {
        /// How many files failed.
        count: usize,
    },
    /// The report could not be written.
    Write(io::Error),
}

// Written out rather than derived (thiserror), so that `cargo install hostcb-seal-cli` builds no
// proc-macro stack.
impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Verify(error) => error.fmt(f),
            Self::Failed { count } => write!(f, "{count} sealed file(s) failed verification"),
            Self::Write(error) => write!(f, "cannot write the report: {error}"),
        }
    }
}

impl std::error::Error for CommandError {}

impl From<VerifyError> for CommandError {
    fn from(error: VerifyError) -> Self {
        Self::Verify(error)
    }
}

/// Runs [`verify_roots`] and writes its report to `out`: one line per failure, then one per note,
/// then a summary with the seconds it took. Fails with [`CommandError::Failed`] if any file
/// failed; print that error as the command's last line (`error: …`) and exit non-zero.
pub fn run_verify(
    roots: &[VerifyRoot],
    options: &VerifyOptions,
    out: &mut dyn Write,
) -> Result<VerifyReport, CommandError> {
    let started = Instant::now();
    let report = verify_roots(roots, options)?;
    writeln!(out, "{report} ({:.3} s)", started.elapsed().as_secs_f64())
        .map_err(CommandError::Write)?;
    if !report.is_ok() {
        return Err(CommandError::Failed {
            count: report.failures.len(),
        });
    }
    Ok(report)
}
