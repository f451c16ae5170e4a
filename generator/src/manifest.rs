//! The generated crate's `Cargo.toml`, whose features between [`FEATURES_BEGIN`] and
//! [`FEATURES_END`] regen writes from the target list ([`for_targets`]), and from which a crate
//! folder in no checkout takes its target list ([`targets`]). The rest of the file is the
//! maintainers'.

use std::path::{Path, PathBuf};

use crate::Ctk;
use crate::emit::{EmitError, GeneratedFile, tree::read_regular};

/// The generated crate's manifest, relative to its root.
pub const PATH: &str = "Cargo.toml";

/// The line that opens the generated features in the generated crate's `Cargo.toml`.
pub const FEATURES_BEGIN: &str = "# BEGIN generated targets: written by `cargo xtask regen` from generator/targets.txt; do not edit.";

/// The line that closes the generated features.
pub const FEATURES_END: &str = "# END generated targets";

/// The generated crate's `Cargo.toml` under `root` with its generated features replaced by one
/// feature per target and `all-targets`. The rest of the file is the maintainers' and is kept
/// byte for byte.
pub fn for_targets(root: &Path, targets: &[Ctk]) -> Result<GeneratedFile, EmitError> {
    let (text, begin, end) = region(root)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out: String = lines[..=begin].concat();
    for ctk in targets {
        out.push_str(&format!("{} = []\n", ctk.feature()));
    }
    let all: Vec<String> = targets
        .iter()
        .map(|c| format!("\"{}\"", c.feature()))
        .collect();
    out.push_str(&format!("all-targets = [{}]\n", all.join(", ")));
    if let Some(newest) = targets.last() {
        out.push_str(&format!("newest-target = [\"{}\"]\n", newest.feature()));
    }
    out.push_str(&lines[end..].concat());
    Ok(GeneratedFile {
        path: PathBuf::from(PATH),
        contents: out,
    })
}

/// The targets whose features the generated features of the generated crate's `Cargo.toml`
/// under `root` declare (`ctk-<major>-<minor> = ...` between [`FEATURES_BEGIN`] and
/// [`FEATURES_END`]), oldest first: the target list of a generated crate that lies in no
/// checkout with a `generator/targets.txt` (what `regen --out` writes for such a folder).
pub fn targets(root: &Path) -> Result<Vec<Ctk>, EmitError> {
    let (text, begin, end) = region(root)?;
    let mut targets: Vec<Ctk> = text
        .split_inclusive('\n')
        .take(end)
        .skip(begin + 1)
        .filter_map(|line| {
            let (key, _) = line.split_once('=')?;
            let (major, minor) = key.trim().strip_prefix("ctk-")?.split_once('-')?;
            format!("{major}.{minor}").parse::<Ctk>().ok()
        })
        .collect();
    targets.sort();
    targets.dedup();
    if targets.is_empty() {
        return Err(EmitError::Manifest {
            path: root.join(PATH),
            problem: format!(
                "declares no `ctk-<major>-<minor>` feature between `{FEATURES_BEGIN}` and `{FEATURES_END}`, so it names no target to write"
            ),
        });
    }
    Ok(targets)
}

/// The text of the generated crate's `Cargo.toml` under `root` and the line numbers (0-based)
/// of its [`FEATURES_BEGIN`] and [`FEATURES_END`] lines.
fn region(root: &Path) -> Result<(String, usize, usize), EmitError> {
    let path = root.join(PATH);
    let text = match read_regular(&path)? {
        Some(bytes) => String::from_utf8(bytes).map_err(|_| EmitError::Manifest {
            path: path.clone(),
            problem: "is not UTF-8".to_owned(),
        })?,
        None => {
            return Err(EmitError::Manifest {
                path,
                problem: "does not exist".to_owned(),
            });
        }
    };
    let region = |line: &str| line.trim_end() == FEATURES_BEGIN || line.trim_end() == FEATURES_END;
    let marks: Vec<(usize, &str)> = text
        .split_inclusive('\n')
        .enumerate()
        .filter(|(_, l)| region(l))
        .collect();
    match marks.as_slice() {
        [(b, first), (e, last)]
            if first.trim_end() == FEATURES_BEGIN && last.trim_end() == FEATURES_END =>
        {
            let (b, e) = (*b, *e);
            Ok((text, b, e))
        }
        _ => Err(EmitError::Manifest {
            path,
            problem: format!(
                "needs one line `{FEATURES_BEGIN}` and, after it, one line `{FEATURES_END}` in its [features] table"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_the_generated_features() {
        let dir = tempfile::tempdir().unwrap();
        let write = |features: &str| {
            std::fs::write(
                dir.path().join(PATH),
                format!(
                    "[package]\nname = \"cuda-hostcb\"\n\n[features]\nctk-9-9 = []\n{FEATURES_BEGIN}\n{features}{FEATURES_END}\n"
                ),
            )
            .unwrap();
        };
        write(
            "ctk-13-0 = []\nctk-12-9 = []\nall-targets = [\"ctk-12-9\", \"ctk-13-0\"]\nnewest-target = [\"ctk-13-0\"]\n",
        );
        assert_eq!(targets(dir.path()).unwrap(), [Ctk::V12_9, Ctk::V13_0]);
        // What regen writes there for that list is the same region.
        let written = for_targets(dir.path(), &[Ctk::V12_9, Ctk::V13_0]).unwrap();
        std::fs::write(dir.path().join(PATH), &written.contents).unwrap();
        assert_eq!(targets(dir.path()).unwrap(), [Ctk::V12_9, Ctk::V13_0]);
        write("all-targets = []\n");
        let err = targets(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("declares no `ctk-<major>-<minor>` feature"),
            "{err}"
        );
        std::fs::write(dir.path().join(PATH), "[package]\n").unwrap();
        let err = targets(dir.path()).unwrap_err().to_string();
        assert!(err.contains("needs one line"), "{err}");
    }
}
