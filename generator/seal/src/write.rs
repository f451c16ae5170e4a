//! Writing a seal: insert the seal line after a file's header line.

use crate::line::{self, PREFIXES};
use crate::{MARKER, check};

/// Why a file could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// The comment leader is not one a seal line may start with.
    UnknownPrefix(String),
    /// The target is not `<major>.<minor>` or `all`.
    InvalidCtk(String),
    /// There is no header line to put the seal after.
    NoHeaderLine,
    /// The text already contains the marker.
    AlreadySealed {
        /// The 1-based line of the first occurrence.
        line: usize,
    },
}

// Written out rather than derived (thiserror), so that `cargo install hostcb-seal-cli` builds no
// proc-macro stack.
impl std::fmt::Display for SealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownPrefix(prefix) => write!(
                f,
                "unknown comment leader `{prefix}`; seal lines start with `//` or `#`"
            ),
            Self::InvalidCtk(ctk) => write!(
                f,
                "invalid ctk `{ctk}`; pass the CUDA toolkit target as `<major>.<minor>` (like 12.9) or `all`"
            ),
            Self::NoHeaderLine => f.write_str(
                "the text has no complete first line; start generated text with a header line ending in a newline",
            ),
            Self::AlreadySealed { line } => write!(
                f,
                "the text already contains `{MARKER}` on line {line}; seal the unsealed text, and keep the marker out of generated content"
            ),
        }
    }
}

impl std::error::Error for SealError {}

/// Seals `unsealed`: inserts the seal line right after its first line (the header line).
///
/// The seal records `ctk` and the SHA-256 of `unsealed`, so
/// [`check_contents`](crate::check_contents) of the result succeeds with that digest.
/// The seal line ends the way the header line ends (`\n` or `\r\n`); `prefix` is the file's
/// comment leader, `//` or `#`.
pub fn seal(unsealed: &str, ctk: &str, prefix: &str) -> Result<String, SealError> {
    if !PREFIXES.contains(&prefix) {
        return Err(SealError::UnknownPrefix(prefix.to_owned()));
    }
    if !line::is_valid_ctk(ctk) {
        return Err(SealError::InvalidCtk(ctk.to_owned()));
    }
    if check::contains_marker(unsealed.as_bytes()) {
        let offset = unsealed.find(MARKER).unwrap_or_default();
        let line = unsealed[..offset].matches('\n').count() + 1;
        return Err(SealError::AlreadySealed { line });
    }
    let header_end = unsealed.find('\n').ok_or(SealError::NoHeaderLine)? + 1;
    let header = &unsealed[..header_end];
    let newline = if header.ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let seal_line = line::render(prefix, ctk, &line::sha256_hex(&[unsealed.as_bytes()]));
    Ok(format!(
        "{header}{seal_line}{newline}{}",
        &unsealed[header_end..]
    ))
}
