//! The CUDA toolkit (CTK) targets the generator knows, and how each is spelled on the command line,
//! in cargo features, module paths and library names.

use std::fmt;
use std::str::FromStr;

/// One CUDA toolkit target. Each has its own pinned header packages and its own generated module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ctk {
    /// CUDA 12.9 (`CUDA_VERSION` 12090).
    V12_9,
    /// CUDA 13.0 (`CUDA_VERSION` 13000).
    V13_0,
    /// CUDA 13.5 (`CUDA_VERSION` 13050).
    V13_5,
}

impl Ctk {
    /// Every target, oldest first.
    pub const ALL: [Ctk; 3] = [Ctk::V12_9, Ctk::V13_0, Ctk::V13_5];

    /// `"12.9"`: how the target is written on the command line and in seals.
    pub fn as_str(self) -> &'static str {
        match self {
            Ctk::V12_9 => "12.9",
            Ctk::V13_0 => "13.0",
            Ctk::V13_5 => "13.5",
        }
    }

    /// The `CUDA_VERSION` its `cuda.h` defines, e.g. 12090.
    pub fn cuda_version(self) -> u32 {
        match self {
            Ctk::V12_9 => 12090,
            Ctk::V13_0 => 13000,
            Ctk::V13_5 => 13050,
        }
    }

    /// The CUDA major version (12 or 13).
    pub fn major(self) -> u32 {
        self.cuda_version() / 1000
    }

    /// The cargo feature of the generated crate that enables this target, e.g. `ctk-12-9`.
    pub fn feature(self) -> String {
        format!("ctk-{}", self.as_str().replace('.', "-"))
    }

    /// The module (and folder) name of this target in the generated crate, e.g. `ctk_12_9`.
    pub fn module(self) -> String {
        format!("ctk_{}", self.as_str().replace('.', "_"))
    }

    /// The soname of the CUDA runtime this target's runtime bindings load.
    pub fn runtime_soname(self) -> &'static str {
        match self.major() {
            12 => "libcudart.so.12",
            _ => "libcudart.so.13",
        }
    }
}

impl fmt::Display for Ctk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--ctk` value that names no supported target.
#[derive(Debug, thiserror::Error)]
#[error(
    "unsupported CTK target '{given}': supported targets are 12.9, 13.0 and 13.5 (or 'all'); pass one of them to --ctk"
)]
pub struct UnknownCtk {
    /// What was given.
    pub given: String,
}

impl FromStr for Ctk {
    type Err = UnknownCtk;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ctk::ALL
            .into_iter()
            .find(|c| c.as_str() == s.trim())
            .ok_or_else(|| UnknownCtk {
                given: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_target_and_rejects_others() {
        for c in Ctk::ALL {
            assert_eq!(c.as_str().parse::<Ctk>().unwrap(), c);
        }
        for bad in ["11.8", "14.0", "banana", "", "12"] {
            let err = bad.parse::<Ctk>().unwrap_err().to_string();
            assert!(
                err.contains("supported targets are 12.9, 13.0 and 13.5"),
                "{err}"
            );
        }
    }

    #[test]
    fn names() {
        assert_eq!(Ctk::V13_5.feature(), "ctk-13-5");
        assert_eq!(Ctk::V12_9.module(), "ctk_12_9");
        assert_eq!(Ctk::V12_9.runtime_soname(), "libcudart.so.12");
        assert_eq!(Ctk::V13_0.runtime_soname(), "libcudart.so.13");
    }
}
