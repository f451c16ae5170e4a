//! The lock file `generator/inputs.lock`: for each pinned `name==version`, the wheel file name and
//! its SHA-256.

use super::{InputError, Provenance};

/// The committed lock, embedded at build time.
const COMMITTED: &str = include_str!("../../inputs.lock");

/// A parsed lock file.
#[derive(Clone, Debug)]
pub struct Lock {
    entries: Vec<LockEntry>,
}

/// One locked wheel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockEntry {
    /// The package name, e.g. `nvidia-cuda-runtime`.
    pub name: String,
    /// The exact version, e.g. `13.0.96`.
    pub version: String,
    /// The wheel file name pip saves.
    pub file: String,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
}

impl LockEntry {
    /// `name==version`.
    pub fn spec(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }

    /// The provenance line of this wheel.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            name: self.name.clone(),
            version: self.version.clone(),
            file: self.file.clone(),
            sha256: self.sha256.clone(),
        }
    }

    /// The folder name under which the part `keep` of this wheel is unpacked: it changes when the
    /// wheel or the kept part changes, so a stale tree is never reused.
    pub(crate) fn unpack_key(&self, keep: &str) -> String {
        let digest = super::wheel::sha256_hex(format!("{}\n{keep}", self.sha256).as_bytes());
        format!("{}-{}-{}", self.name, self.version, &digest[..16])
    }
}

impl Lock {
    /// The committed `generator/inputs.lock`.
    pub fn committed() -> Result<Self, InputError> {
        Lock::parse(COMMITTED)
    }

    /// Parses lock text: `#` starts a comment; every other non-blank line is
    /// `<name>==<version> <wheel file> <sha256>`, fields separated by whitespace.
    pub fn parse(text: &str) -> Result<Self, InputError> {
        let mut entries: Vec<LockEntry> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |detail: String| InputError::BadLock {
                line: i + 1,
                detail,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [spec, file, sha256] = fields[..] else {
                return Err(bad(format!("expected 3 fields, found {}", fields.len())));
            };
            let Some((name, version)) = spec.split_once("==") else {
                return Err(bad(format!("'{spec}' is not name==version")));
            };
            if name.is_empty() || version.is_empty() {
                return Err(bad(format!("'{spec}' is not name==version")));
            }
            if !file.ends_with(".whl") || file.contains('/') {
                return Err(bad(format!("'{file}' is not a wheel file name")));
            }
            if sha256.len() != 64
                || !sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(bad(format!(
                    "'{sha256}' is not a lower-case hex SHA-256 (64 digits)"
                )));
            }
            let entry = LockEntry {
                name: name.to_owned(),
                version: version.to_owned(),
                file: file.to_owned(),
                sha256: sha256.to_owned(),
            };
            if entries.iter().any(|e| e.spec() == entry.spec()) {
                return Err(bad(format!("{spec} is locked twice")));
            }
            entries.push(entry);
        }
        Ok(Lock { entries })
    }

    /// The entry for `name==version`.
    pub fn get(&self, spec: &str) -> Result<&LockEntry, InputError> {
        self.entries
            .iter()
            .find(|e| e.spec() == spec)
            .ok_or_else(|| InputError::NotLocked {
                spec: spec.to_owned(),
            })
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[LockEntry] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3";

    #[test]
    fn parses_lines_and_skips_comments() {
        let lock = Lock::parse(&format!(
            "# header\n\n a==1.0  a-1.0-py3-none-any.whl  {SHA} # why\n"
        ))
        .unwrap();
        let e = lock.get("a==1.0").unwrap();
        assert_eq!(e.file, "a-1.0-py3-none-any.whl");
        assert_eq!(e.sha256, SHA);
        let err = lock.get("a==2.0").unwrap_err().to_string();
        assert!(err.contains("no entry for a==2.0"), "{err}");
    }

    #[test]
    fn rejects_malformed_lines() {
        for (text, want) in [
            ("a==1 a.whl\n".to_owned(), "line 1: expected 3 fields"),
            (
                format!("\na-1 a.whl {SHA}"),
                "line 2: 'a-1' is not name==version",
            ),
            (format!("a==1 a.zip {SHA}"), "not a wheel file name"),
            (
                format!("a==1 a.whl {}", SHA.to_uppercase()),
                "not a lower-case hex",
            ),
            (
                format!("a==1 a.whl {SHA}\na==1 b.whl {SHA}"),
                "locked twice",
            ),
        ] {
            let err = Lock::parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
    }

    #[test]
    fn unpack_key_depends_on_hash_and_kept_part() {
        let lock = Lock::committed().unwrap();
        let e = lock.get("libclang==18.1.1").unwrap();
        assert!(e.unpack_key("x").starts_with("libclang-18.1.1-"));
        assert_ne!(e.unpack_key("x"), e.unpack_key("y"));
    }
}
