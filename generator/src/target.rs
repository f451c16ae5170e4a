//! CUDA toolkit (CTK) targets as data: a target is a `MAJOR.MINOR` version. Which targets the
//! generator can make is the lock's business (`generator/inputs.lock` pins header packages per
//! target); which of them `generated/` holds is the committed list `generator/targets.txt`
//! ([`TargetList`]). Nothing else in the workspace names a target: the generated crate's
//! `for_each_target!` macro hands the list to the code that needs it.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// One CUDA toolkit target, e.g. 12.9. Each has its own pinned header packages and its own
/// generated module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ctk {
    major: u32,
    minor: u32,
}

impl Ctk {
    /// CUDA 12.9, the last 12.x toolkit.
    pub const V12_9: Ctk = Ctk::new(12, 9);
    /// CUDA 13.0.
    pub const V13_0: Ctk = Ctk::new(13, 0);
    /// CUDA 13.5.
    pub const V13_5: Ctk = Ctk::new(13, 5);

    /// The target `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Ctk { major, minor }
    }

    /// The `CUDA_VERSION` its `cuda.h` defines, e.g. 12090.
    pub fn cuda_version(self) -> u32 {
        self.major * 1000 + self.minor * 10
    }

    /// The CUDA major version (12 or 13).
    pub fn major(self) -> u32 {
        self.major
    }

    /// The CUDA minor version.
    pub fn minor(self) -> u32 {
        self.minor
    }

    /// The cargo feature of the generated crate that enables this target, e.g. `ctk-12-9`.
    pub fn feature(self) -> String {
        format!("ctk-{}-{}", self.major, self.minor)
    }

    /// The module (and folder) name of this target in the generated crate, e.g. `ctk_12_9`.
    pub fn module(self) -> String {
        format!("ctk_{}_{}", self.major, self.minor)
    }

    /// The soname of the CUDA runtime this target's runtime bindings load.
    pub fn runtime_soname(self) -> String {
        format!("libcudart.so.{}", self.major)
    }
}

impl fmt::Display for Ctk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A `--ctk` value that is not a `MAJOR.MINOR` version.
#[derive(Debug, thiserror::Error)]
#[error("'{given}' is not a CTK target: write it as MAJOR.MINOR, e.g. 12.9 or 13.0")]
pub struct UnknownCtk {
    /// What was given.
    pub given: String,
}

impl FromStr for Ctk {
    type Err = UnknownCtk;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |p: &str| -> Option<u32> {
            (!p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        };
        s.trim()
            .split_once('.')
            .and_then(|(major, minor)| Some(Ctk::new(number(major)?, number(minor)?)))
            .ok_or_else(|| UnknownCtk {
                given: s.to_owned(),
            })
    }
}

/// Lists targets for messages: `12.9, 13.0 and 13.5`.
pub fn spelled(targets: &[Ctk]) -> String {
    match targets {
        [] => "none".to_owned(),
        [one] => one.to_string(),
        [rest @ .., last] => format!(
            "{} and {last}",
            rest.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The committed list of the targets `generated/` holds (`generator/targets.txt`): one
/// `MAJOR.MINOR` per line, `#` comments. Sorted and free of duplicates once parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetList {
    /// The targets, oldest first.
    pub targets: Vec<Ctk>,
}

/// A target list that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum TargetListError {
    /// The file could not be read.
    #[error("cannot read the target list {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a target.
    #[error("{path}:{line}: {source}")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// Why.
        source: UnknownCtk,
    },
    /// The list names no target.
    #[error("{path} lists no target; add at least one MAJOR.MINOR line")]
    Empty {
        /// The file.
        path: String,
    },
}

impl TargetList {
    /// Reads and parses a target list file.
    pub fn load(path: &Path) -> Result<Self, TargetListError> {
        let text = std::fs::read_to_string(path).map_err(|source| TargetListError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses target-list text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, TargetListError> {
        let mut targets = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            targets.push(
                line.parse::<Ctk>()
                    .map_err(|source| TargetListError::Syntax {
                        path: origin.to_owned(),
                        line: i + 1,
                        source,
                    })?,
            );
        }
        targets.sort();
        targets.dedup();
        if targets.is_empty() {
            return Err(TargetListError::Empty {
                path: origin.to_owned(),
            });
        }
        Ok(TargetList { targets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_any_major_minor_and_rejects_others() {
        assert_eq!("12.0".parse::<Ctk>().unwrap(), Ctk::new(12, 0));
        assert_eq!(" 13.5 ".parse::<Ctk>().unwrap(), Ctk::V13_5);
        for bad in [
            "banana", "", "12", "12.", ".9", "12.9.1", "1x.2", "-1.0", "12.9a",
        ] {
            let err = bad.parse::<Ctk>().unwrap_err().to_string();
            assert!(err.contains("is not a CTK target"), "{bad}: {err}");
        }
    }

    #[test]
    fn names() {
        let c = Ctk::new(13, 2);
        assert_eq!(c.to_string(), "13.2");
        assert_eq!(c.feature(), "ctk-13-2");
        assert_eq!(c.module(), "ctk_13_2");
        assert_eq!(c.cuda_version(), 13020);
        assert_eq!(Ctk::V12_9.runtime_soname(), "libcudart.so.12");
        assert_eq!(Ctk::V13_0.runtime_soname(), "libcudart.so.13");
    }

    #[test]
    fn lists_sort_and_reject_bad_lines() {
        let list = TargetList::parse("# t\n13.5\n12.9 # x\n\n13.0\n12.9\n", "t").unwrap();
        assert_eq!(list.targets, [Ctk::V12_9, Ctk::V13_0, Ctk::V13_5]);
        assert_eq!(spelled(&list.targets), "12.9, 13.0 and 13.5");
        let err = TargetList::parse("12.9\nthirteen\n", "t").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t:2: 'thirteen' is not a CTK target: write it as MAJOR.MINOR, e.g. 12.9 or 13.0"
        );
        assert!(TargetList::parse("# none\n", "t").is_err());
    }
}
