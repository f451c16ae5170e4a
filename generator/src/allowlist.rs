//! The checked-in allow-lists (`generator/allowlist/{driver,runtime}.txt`): which functions,
//! types and constants of the headers the bindings cover.

use std::path::Path;

/// The parsed contents of one allow-list file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    /// C function names; each also matches its versioned (`_vN`) and per-thread twins.
    pub functions: Vec<String>,
    /// Type names emitted even where no listed function uses them.
    pub types: Vec<String>,
    /// Macro constants and variables to emit.
    pub vars: Vec<String>,
}

/// An allow-list that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum AllowListError {
    /// The file could not be read.
    #[error("cannot read the allow-list {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a C identifier or a section header.
    #[error("{path}:{line}: '{text}' is not a C identifier or one of [functions], [types], [vars]")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
}

impl AllowList {
    /// Reads and parses an allow-list file.
    pub fn load(path: &Path) -> Result<Self, AllowListError> {
        let text = std::fs::read_to_string(path).map_err(|source| AllowListError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses allow-list text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, AllowListError> {
        let mut list = AllowList::default();
        let mut section: Option<&mut Vec<String>> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let syntax = || AllowListError::Syntax {
                path: origin.to_owned(),
                line: i + 1,
                text: line.to_owned(),
            };
            match line {
                "[functions]" => section = Some(&mut list.functions),
                "[types]" => section = Some(&mut list.types),
                "[vars]" => section = Some(&mut list.vars),
                name if is_c_identifier(name) => match section.as_mut() {
                    Some(items) => items.push(name.to_owned()),
                    None => return Err(syntax()),
                },
                _ => return Err(syntax()),
            }
        }
        Ok(list)
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
    fn parses_sections_and_comments() {
        let list = AllowList::parse(
            "# c\n[functions]\ncuInit # x\n\n[types]\nCUhostFn\n[vars]\nA\n",
            "t",
        )
        .unwrap();
        assert_eq!(list.functions, ["cuInit"]);
        assert_eq!(list.types, ["CUhostFn"]);
        assert_eq!(list.vars, ["A"]);
    }

    #[test]
    fn rejects_names_outside_sections_and_non_identifiers() {
        assert!(AllowList::parse("cuInit\n", "t").is_err());
        let err = AllowList::parse("[functions]\ncu Init\n", "t").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t:2: 'cu Init' is not a C identifier or one of [functions], [types], [vars]"
        );
    }

    #[test]
    fn committed_lists_parse() {
        for api in ["driver", "runtime"] {
            let dir =
                std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
            let path = Path::new(&dir).join(format!("allowlist/{api}.txt"));
            let list = AllowList::load(&path).unwrap();
            assert!(list.functions.len() > 40, "{api}");
        }
    }
}
