//! Seal lines for generated files: write one into a file, check one, and verify a tree of files.
//! Needs no CUDA headers and no libclang, only the bytes of the files (and `git`, when present).
//!
//! # The seal line
//!
//! Every generated file carries exactly one seal line, a whole line, normally line 2 right
//! after the generated-file header:
//!
//! ```text
//! <prefix> <marker> format=1; ctk=<target>; content-sha256=<64 lowercase hex digits>
//! ```
//!
//! - `<prefix>` is the file's comment leader, `//` or `#`, followed by one space;
//! - `<marker>` is [`marker()`]: this crate's name followed by a colon. It is never spelled out
//!   whole in this crate's own files, so they never look sealed;
//! - `ctk` is the CUDA toolkit target, `<major>.<minor>` (`12.9`) or `all`;
//! - `content-sha256` is the SHA-256 of the file's bytes with the seal line, and the `\n` that
//!   ends it, removed.
//!
//! Any line containing the marker counts as a seal line, so a second seal or a half-mangled one
//! is caught rather than ignored.
//!
//! # Line endings
//!
//! The digest is over the exact bytes: nothing is normalised. A checkout that converts line
//! endings (`core.autocrlf`) changes the bytes and so breaks the seal; mark generated files
//! `-text` in `.gitattributes`. A file whose seal checks once its CRLF line endings are LF again
//! fails as [`SealProblem::LineEndings`], which names that remedy, not as an edit. A `\r` before the seal line's `\n` is part of the
//! seal line: [`seal`] ends the seal line the way the header line ends, so CRLF files round-trip.
//!
//! # The work tree or the index
//!
//! [`verify_roots`] reads the work tree by default; with [`Source::Index`] it reads git's index,
//! what the next commit will contain, which is what a pre-commit hook must check
//! (`hostcb-seal verify --staged`).
//!
//! # What a seal proves
//!
//! A seal proves that nobody edited the file after it was written. It does not prove which
//! generator, target or inputs made it; only regenerating and comparing catches stale output.

mod check;
mod command;
mod git;
mod index;
mod line;
pub mod sources;
mod verify;
mod write;

pub use check::{SealInfo, SealProblem, check_contents};
pub use command::{CommandError, run_verify};
pub use verify::{
    ALLOW_DELETIONS_ENV, ALLOW_DELETIONS_FLAG, CTK_PLACEHOLDER, Failure, Problem, Source,
    VerifyError, VerifyOptions, VerifyReport, VerifyRoot, verify_paths, verify_paths_with,
    verify_roots, verify_tree,
};
pub use write::{SealError, seal};

/// The SHA-256 of the sources this crate was compiled from (see [`sources`]).
pub const BUILT_FROM_SOURCES: &str = env!("HOSTCB_BUILT_FROM_SOURCES");

/// The seal format this crate writes and the only one it reads.
pub const FORMAT: u32 = 1;

/// Spelled in two pieces so that this crate's own sources never contain the whole marker.
const MARKER: &str = concat!("hostcb", "-seal:");

/// The marker that makes a line a seal line: this crate's name followed by a colon.
///
/// A file that contains it anywhere is treated as generated and must carry exactly one valid
/// seal line.
pub fn marker() -> &'static str {
    MARKER
}
