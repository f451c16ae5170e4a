//! Checking one file's contents: exactly one well-formed seal line whose digest matches.

use std::fmt;
use std::ops::Range;

use crate::line::{self, LineError};
use crate::{FORMAT, MARKER};

/// What a valid seal records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealInfo {
    /// The seal format, always [`FORMAT`] for a seal that checks.
    pub format: u32,
    /// The CUDA toolkit target the file was generated for: `<major>.<minor>` or `all`.
    pub ctk: String,
    /// The recorded (and matching) SHA-256 of the file without its seal line, lowercase hex.
    pub sha256: String,
    /// The 1-based line number of the seal line.
    pub line: usize,
}

/// Why a file's seal does not check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealProblem {
    /// No line contains the marker.
    Missing,
    /// More than one line contains the marker.
    Multiple {
        /// The 1-based numbers of the lines that contain the marker.
        lines: Vec<usize>,
    },
    /// The one line with the marker is not a well-formed seal line.
    Malformed {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The seal line names a format this crate does not read.
    UnsupportedFormat {
        /// The 1-based line number.
        line: usize,
        /// The format number it names.
        format: u32,
    },
    /// The file's line endings were converted to CRLF after it was sealed (a checkout with
    /// `core.autocrlf`, or an editor): with each `\r\n` turned back into `\n` the seal checks.
    LineEndings,
    /// The file was edited after it was sealed.
    Mismatch {
        /// The digest the seal records.
        recorded: String,
        /// The digest of the file as it is now, without its seal line.
        actual: String,
    },
}

// Written out rather than derived (thiserror), so that `cargo install hostcb-seal-cli` builds no
// proc-macro stack.
impl fmt::Display for SealProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.what(), self.fix("the file's generator"))
    }
}

impl std::error::Error for SealProblem {}

impl SealProblem {
    /// What is wrong, without what to do about it.
    pub(crate) fn what(&self) -> String {
        match self {
            Self::Missing => format!("has no seal line (no `{MARKER}` line)"),
            Self::Multiple { lines } => format!(
                "has {} seal lines (lines {}); a generated file carries exactly one",
                lines.len(),
                lines
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::Malformed { line, reason } => format!("malformed seal on line {line}: {reason}"),
            Self::UnsupportedFormat { line, format } => format!(
                "seal on line {line} has format={format}, but this hostcb-seal reads only format={FORMAT}"
            ),
            Self::LineEndings => "line endings changed after sealing: it has CRLF (`\\r\\n`) line endings where the sealed file has LF, as a checkout with core.autocrlf or eol=crlf writes them"
                .to_owned(),
            Self::Mismatch { recorded, actual } => format!(
                "edited after sealing: recorded sha256 {}, actual {}",
                Abbrev(recorded),
                Abbrev(actual)
            ),
        }
    }

    /// What to do about it, given how the file is regenerated.
    pub(crate) fn fix(&self, regen: &str) -> String {
        match self {
            Self::UnsupportedFormat { .. } => {
                format!("update hostcb-seal, or regenerate with {regen}")
            }
            Self::LineEndings => LINE_ENDINGS_FIX.to_owned(),
            _ => format!("regenerate with {regen}"),
        }
    }
}

/// What to do about converted line endings: nothing needs regenerating.
const LINE_ENDINGS_FIX: &str = "mark the sealed files `-text` in .gitattributes (a line such as `<folder>/** -text`) so that git never converts them, then check them out again (delete them and `git checkout -- <path>`)";

/// A digest shortened for messages.
struct Abbrev<'a>(&'a str);

impl fmt::Display for Abbrev<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.get(..12) {
            Some(head) if self.0.len() > 12 => write!(f, "{head}…"),
            _ => f.write_str(self.0),
        }
    }
}

/// Checks that `bytes` carry exactly one well-formed seal line whose digest matches the rest.
///
/// The digest is over the exact bytes, with only the seal line and its `\n` removed.
pub fn check_contents(bytes: &[u8]) -> Result<SealInfo, SealProblem> {
    let seal_lines = marker_lines(bytes);
    let (number, span) = match seal_lines.as_slice() {
        [] => return Err(SealProblem::Missing),
        [one] => one.clone(),
        many => {
            return Err(SealProblem::Multiple {
                lines: many.iter().map(|(number, _)| *number).collect(),
            });
        }
    };
    let text_end = if bytes[..span.end].ends_with(b"\n") {
        span.end - 1
    } else {
        span.end
    };
    let parsed = line::parse(&bytes[span.start..text_end]).map_err(|error| match error {
        LineError::Malformed(reason) => SealProblem::Malformed {
            line: number,
            reason,
        },
        LineError::UnsupportedFormat(format) => SealProblem::UnsupportedFormat {
            line: number,
            format,
        },
    })?;
    let actual = line::sha256_hex(&[&bytes[..span.start], &bytes[span.end..]]);
    if actual != parsed.sha256 {
        if crlf_converted(bytes) {
            return Err(SealProblem::LineEndings);
        }
        return Err(SealProblem::Mismatch {
            recorded: parsed.sha256,
            actual,
        });
    }
    Ok(SealInfo {
        format: FORMAT,
        ctk: parsed.ctk,
        sha256: parsed.sha256,
        line: number,
    })
}

/// Whether `bytes` have CRLF line endings and check once each `\r\n` is `\n` again: the
/// sealed file was LF, and only its line endings changed.
fn crlf_converted(bytes: &[u8]) -> bool {
    if !bytes.windows(2).any(|pair| pair == b"\r\n") {
        return false;
    }
    let mut lf = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(2).position(|pair| pair == b"\r\n") {
        lf.extend_from_slice(&rest[..at]);
        lf.push(b'\n');
        rest = &rest[at + 2..];
    }
    lf.extend_from_slice(rest);
    check_contents(&lf).is_ok()
}

/// The target recorded by the one seal line of `bytes`, if there is exactly one and it parses,
/// whether or not the digest matches.
pub(crate) fn seal_ctk(bytes: &[u8]) -> Option<String> {
    let [(_, span)] = marker_lines(bytes).try_into().ok()?;
    let line = &bytes[span];
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line::parse(line).ok().map(|parsed| parsed.ctk)
}

/// Whether `bytes` contain the marker anywhere.
pub(crate) fn contains_marker(bytes: &[u8]) -> bool {
    marker_offsets(bytes).next().is_some()
}

/// The lines that contain the marker: 1-based number, and byte span including the `\n`.
fn marker_lines(bytes: &[u8]) -> Vec<(usize, Range<usize>)> {
    let mut lines: Vec<(usize, Range<usize>)> = Vec::new();
    let mut counted_to = 0;
    let mut number = 1;
    for offset in marker_offsets(bytes) {
        if lines.last().is_some_and(|(_, span)| span.contains(&offset)) {
            continue;
        }
        let start = bytes[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |newline| newline + 1);
        let end = bytes[offset..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |newline| offset + newline + 1);
        number += bytes[counted_to..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted_to = start;
        lines.push((number, start..end));
    }
    lines
}

/// Byte offsets of every occurrence of the marker, in order.
fn marker_offsets(bytes: &[u8]) -> Box<dyn Iterator<Item = usize> + '_> {
    match std::str::from_utf8(bytes) {
        // `str` matching is much faster than a byte-window scan; generated files are UTF-8.
        Ok(text) => Box::new(text.match_indices(MARKER).map(|(offset, _)| offset)),
        Err(_) => Box::new(
            bytes
                .windows(MARKER.len())
                .enumerate()
                .filter(|(_, window)| *window == MARKER.as_bytes())
                .map(|(offset, _)| offset),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_lines_are_numbered_and_deduplicated() {
        let text = format!("a\n{MARKER}{MARKER}\nb\n\nx {MARKER}");
        let lines = marker_lines(text.as_bytes());
        let numbers: Vec<usize> = lines.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [2, 5]);
        assert_eq!(&text[lines[0].1.clone()], format!("{MARKER}{MARKER}\n"));
        assert_eq!(&text[lines[1].1.clone()], format!("x {MARKER}"));
    }

    #[test]
    fn finds_the_marker_in_bytes_that_are_not_utf8() {
        let mut bytes = vec![0xff, b'\n'];
        bytes.extend_from_slice(MARKER.as_bytes());
        assert!(contains_marker(&bytes));
        assert_eq!(marker_lines(&bytes)[0].0, 2);
        assert!(!contains_marker(&[0xff, 0xfe]));
    }

    #[test]
    fn digests_are_abbreviated_in_messages() {
        let problem = SealProblem::Mismatch {
            recorded: "a".repeat(64),
            actual: "b".repeat(64),
        };
        assert_eq!(
            problem.to_string(),
            "edited after sealing: recorded sha256 aaaaaaaaaaaa…, actual bbbbbbbbbbbb…; \
             regenerate with the file's generator"
        );
    }
}
