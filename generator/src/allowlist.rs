//! The checked-in deny-lists (`generator/allowlist/{driver,runtime}.txt`): the few functions of
//! the headers the bindings leave out, each with its reason. Everything else that `cuda.h` and
//! `cuda_runtime_api.h` declare (outside their internal blocks) is bound, with every type it
//! reaches.
//!
//! One entry per line, `name: reason`; `#` starts a comment. A name is the declaration as
//! bindgen sees it, after the headers' renaming macros (`cudaGetErrorName`, not an alias). An
//! entry without a reason is an error: the list is short because each entry must say why.

use std::path::Path;

/// One function the bindings leave out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The declared C name.
    pub name: String,
    /// Why it is left out.
    pub reason: String,
}

/// The parsed contents of one deny-list file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DenyList {
    /// The functions left out, in file order.
    pub functions: Vec<Denied>,
}

/// A deny-list that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum DenyListError {
    /// The file could not be read.
    #[error("cannot read the deny-list {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not `name: reason`.
    #[error(
        "{path}:{line}: '{text}' is not `<C function name>: <reason>`; every entry names one declared function and says why it is left out"
    )]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
    /// A name is listed twice.
    #[error("{path}:{line}: {name} is already listed; keep one entry per function")]
    Duplicate {
        /// The file.
        path: String,
        /// 1-based line number of the second entry.
        line: usize,
        /// The name.
        name: String,
    },
}

impl DenyList {
    /// Reads and parses a deny-list file.
    pub fn load(path: &Path) -> Result<Self, DenyListError> {
        let text = std::fs::read_to_string(path).map_err(|source| DenyListError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses deny-list text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, DenyListError> {
        let mut list = DenyList::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let syntax = || DenyListError::Syntax {
                path: origin.to_owned(),
                line: i + 1,
                text: line.to_owned(),
            };
            let (name, reason) = line.split_once(':').ok_or_else(syntax)?;
            let (name, reason) = (name.trim(), reason.trim());
            if !is_c_identifier(name) || reason.is_empty() {
                return Err(syntax());
            }
            if list.denies(name) {
                return Err(DenyListError::Duplicate {
                    path: origin.to_owned(),
                    line: i + 1,
                    name: name.to_owned(),
                });
            }
            list.functions.push(Denied {
                name: name.to_owned(),
                reason: reason.to_owned(),
            });
        }
        Ok(list)
    }

    /// Whether `name` (a declared function) is left out.
    pub fn denies(&self, name: &str) -> bool {
        self.functions.iter().any(|d| d.name == name)
    }
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_comments() {
        let list = DenyList::parse(
            "# c\ncudaGetErrorName: returns a string # x\n\n  cuX :  why  \n",
            "t",
        )
        .unwrap();
        assert_eq!(
            list.functions,
            [
                Denied {
                    name: "cudaGetErrorName".into(),
                    reason: "returns a string".into()
                },
                Denied {
                    name: "cuX".into(),
                    reason: "why".into()
                }
            ]
        );
        assert!(list.denies("cuX") && !list.denies("cuY"));
    }

    #[test]
    fn rejects_an_entry_without_a_reason_a_non_identifier_and_a_duplicate() {
        for (text, want) in [
            (
                "cuInit\n",
                "t:1: 'cuInit' is not `<C function name>: <reason>`; every entry names one declared function and says why it is left out",
            ),
            (
                "cuInit:\n",
                "t:1: 'cuInit:' is not `<C function name>: <reason>`; every entry names one declared function and says why it is left out",
            ),
            (
                "cu Init: x\n",
                "t:1: 'cu Init: x' is not `<C function name>: <reason>`; every entry names one declared function and says why it is left out",
            ),
            (
                "cuA: x\ncuA: y\n",
                "t:2: cuA is already listed; keep one entry per function",
            ),
        ] {
            assert_eq!(DenyList::parse(text, "t").unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn committed_lists_parse_and_stay_short() {
        for api in ["driver", "runtime"] {
            let dir =
                std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
            let path = Path::new(&dir).join(format!("allowlist/{api}.txt"));
            let list = DenyList::load(&path).unwrap();
            assert!(list.functions.len() < 20, "{api}: {:?}", list.functions);
        }
    }
}
