//! The seal line's text: render one, parse one, and the SHA-256 digest it records.

use sha2::{Digest, Sha256};

use crate::{FORMAT, MARKER};

/// Comment leaders a seal line may start with.
pub(crate) const PREFIXES: [&str; 2] = ["//", "#"];

/// A seal line that parsed, before its digest is compared with the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ParsedLine {
    pub(crate) ctk: String,
    pub(crate) sha256: String,
}

/// Why a seal line did not parse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineError {
    Malformed(String),
    UnsupportedFormat(u32),
}

/// The seal line for `sha256`, without its line ending.
pub(crate) fn render(prefix: &str, ctk: &str, sha256: &str) -> String {
    format!("{prefix} {MARKER} format={FORMAT}; ctk={ctk}; content-sha256={sha256}")
}

/// Whether `ctk` is `<digits>.<digits>` or `all`.
pub(crate) fn is_valid_ctk(ctk: &str) -> bool {
    if ctk == "all" {
        return true;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(ctk.split_once('.'), Some((major, minor)) if digits(major) && digits(minor))
}

/// Lowercase hex SHA-256 of the bytes of `parts`, hashed one after the other.
pub(crate) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Parses one seal line (without its `\n`; a trailing `\r` is allowed).
pub(crate) fn parse(line: &[u8]) -> Result<ParsedLine, LineError> {
    let malformed = |reason: &str| LineError::Malformed(reason.to_owned());
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = std::str::from_utf8(line).map_err(|_| malformed("the line is not valid UTF-8"))?;

    let after_prefix = PREFIXES
        .iter()
        .find_map(|prefix| line.strip_prefix(prefix)?.strip_prefix(' '))
        .ok_or_else(|| {
            malformed("the line must start with `// ` or `# ` followed by the marker")
        })?;
    let fields = after_prefix.strip_prefix(MARKER).ok_or_else(|| {
        malformed(
            "the marker must follow the comment leader and one space, at the start of the line",
        )
    })?;
    let fields = fields
        .strip_prefix(' ')
        .ok_or_else(|| malformed("expected one space after the marker"))?;

    // The format comes first, so that a later format may change everything after it.
    let (format, rest) = fields.split_once("; ").unwrap_or((fields, ""));
    let format = format
        .strip_prefix("format=")
        .ok_or_else(|| malformed("the first field must be `format=<number>`"))?;
    if format.is_empty() || !format.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed("`format=` must be followed by a decimal number"));
    }
    let format: u32 = format
        .parse()
        .map_err(|_| malformed("the format number is too large"))?;
    if format != FORMAT {
        return Err(LineError::UnsupportedFormat(format));
    }

    let (ctk, digest) = rest.split_once("; ").ok_or_else(|| {
        malformed("expected the fields `format`, `ctk` and `content-sha256`, separated by `; `")
    })?;
    let ctk = ctk
        .strip_prefix("ctk=")
        .ok_or_else(|| malformed("the second field must be `ctk=<major>.<minor>` or `ctk=all`"))?;
    if !is_valid_ctk(ctk) {
        return Err(malformed(
            "`ctk=` must be `<major>.<minor>` (like 12.9) or `all`",
        ));
    }
    let sha256 = digest
        .strip_prefix("content-sha256=")
        .ok_or_else(|| malformed("the third field must be `content-sha256=<64 lowercase hex>`"))?;
    if sha256.len() != 64
        || !sha256
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(malformed(
            "`content-sha256=` must be followed by exactly 64 lowercase hex digits and nothing else",
        ));
    }
    Ok(ParsedLine {
        ctk: ctk.to_owned(),
        sha256: sha256.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn renders_what_it_parses() {
        for prefix in PREFIXES {
            for ctk in ["12.9", "13.0", "all"] {
                let line = render(prefix, ctk, ZEROS);
                let parsed = parse(line.as_bytes()).unwrap();
                assert_eq!(parsed.ctk, ctk);
                assert_eq!(parsed.sha256, ZEROS);
            }
        }
    }

    #[test]
    fn ctk_tokens() {
        for good in ["12.9", "13.0", "1.10", "all"] {
            assert!(is_valid_ctk(good), "{good}");
        }
        for bad in [
            "", "12", "12.", ".9", "12.9.1", "v12.9", "ALL", "12.x", "1 2.9",
        ] {
            assert!(!is_valid_ctk(bad), "{bad}");
        }
    }

    #[test]
    fn known_digest() {
        assert_eq!(
            sha256_hex(&[b"ab", b"c"]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn trailing_text_is_malformed() {
        let line = format!("{} ", render("//", "12.9", ZEROS));
        assert!(matches!(
            parse(line.as_bytes()),
            Err(LineError::Malformed(_))
        ));
    }

    #[test]
    fn leading_space_is_malformed() {
        let line = format!(" {}", render("//", "12.9", ZEROS));
        assert!(matches!(
            parse(line.as_bytes()),
            Err(LineError::Malformed(_))
        ));
    }

    #[test]
    fn huge_format_is_malformed() {
        let line = format!("# {MARKER} format=99999999999; ctk=all; content-sha256={ZEROS}");
        assert!(matches!(
            parse(line.as_bytes()),
            Err(LineError::Malformed(_))
        ));
    }
}
