//! Emitting: formats the written syntax trees with prettyplease, adds the generated-file header
//! and the seal, and writes the tree: only files whose bytes change, each atomically, and all of
//! them staged before any is replaced, so a failed write leaves every existing file as it was.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::Ctk;
use crate::inputs::Provenance;

/// Spelled with an escape so that the generator's own source never looks generated.
const GENERATED: &str = "\x40generated";

/// The generator's name and version, as recorded in headers and provenance.
pub const GENERATOR: &str = concat!("hostcb-generator ", env!("CARGO_PKG_VERSION"));

/// One output file: its path relative to the generated crate's root, and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative path, e.g. `src/bindings/ctk_12_9/driver.rs`.
    pub path: PathBuf,
    /// The sealed contents.
    pub contents: String,
}

/// Why output could not be produced or written.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// The seal could not be added (the content already carries a seal marker).
    #[error("cannot seal {path}: {source}")]
    Seal {
        /// The file.
        path: PathBuf,
        /// Why.
        source: hostcb_seal::SealError,
    },
    /// The generated crate's `Cargo.toml` has no place for the generated features.
    #[error("{path} {problem}; nothing was written")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The output folder or a file in it cannot be written.
    #[error(
        "cannot write {path}: {source}; check that the output directory exists and is writable (nothing was changed)"
    )]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The name prefix of the temporary files [`write_tree`] stages beside their targets. A killed
/// run can leave them behind; the next run removes them, and `cargo xtask verify` skips them.
pub const TEMP_PREFIX: &str = ".regen-";

/// The sealed files in each target's folder.
pub const TARGET_FILES: [&str; 5] = [
    "mod.rs",
    "driver.rs",
    "runtime.rs",
    "layout.rs",
    "provenance.toml",
];

/// The folder of every target's folder, relative to the generated crate's root.
pub const BINDINGS_DIR: &str = "src/bindings";

/// The sealed module list of the generated crate, relative to its root: one module per target,
/// and the `for_each_target!` macro.
pub const BINDINGS_MOD: &str = "src/bindings/mod.rs";

/// The generated crate's manifest, whose features between [`FEATURES_BEGIN`] and
/// [`FEATURES_END`] are written from the target list.
pub const MANIFEST: &str = "Cargo.toml";

/// The line that opens the generated features in the generated crate's `Cargo.toml`.
pub const FEATURES_BEGIN: &str = "# BEGIN generated targets: written by `cargo xtask regen` from generator/targets.txt; do not edit.";

/// The line that closes the generated features.
pub const FEATURES_END: &str = "# END generated targets";

/// The folder of one target's files, relative to the generated crate's root.
pub fn target_dir(ctk: Ctk) -> PathBuf {
    Path::new(BINDINGS_DIR).join(ctk.module())
}

/// Every sealed file of `targets`, relative to the generated crate's root:
/// `src/bindings/mod.rs` and `src/bindings/<module>/{mod.rs,driver.rs,runtime.rs,layout.rs,provenance.toml}`.
/// What `cargo xtask verify` expects to find.
pub fn sealed_files(targets: &[Ctk]) -> Vec<PathBuf> {
    std::iter::once(PathBuf::from(BINDINGS_MOD))
        .chain(
            targets
                .iter()
                .flat_map(|&ctk| TARGET_FILES.map(|name| target_dir(ctk).join(name))),
        )
        .collect()
}

/// The sealed `src/bindings/mod.rs` of `targets`, from the writer's syntax tree.
pub fn bindings_mod(file: &syn::File) -> Result<GeneratedFile, EmitError> {
    let header = format!(
        "// {GENERATED} by {GENERATOR} from generator/targets.txt. Do not edit: regenerate with `cargo xtask regen --ctk all`.\n"
    );
    let unsealed = format!("{header}{}", prettyplease::unparse(file));
    let path = PathBuf::from(BINDINGS_MOD);
    let contents = hostcb_seal::seal(&unsealed, "all", "//").map_err(|source| EmitError::Seal {
        path: path.clone(),
        source,
    })?;
    Ok(GeneratedFile { path, contents })
}

/// The generated crate's `Cargo.toml` under `root` with its generated features replaced by one
/// feature per target and `all-targets`. The rest of the file is the maintainers' and is kept
/// byte for byte.
pub fn manifest(root: &Path, targets: &[Ctk]) -> Result<GeneratedFile, EmitError> {
    let path = root.join(MANIFEST);
    let text = std::fs::read_to_string(&path).map_err(|source| EmitError::Manifest {
        path: path.clone(),
        problem: format!("cannot be read: {source}"),
    })?;
    let region = |line: &str| line.trim_end() == FEATURES_BEGIN || line.trim_end() == FEATURES_END;
    let marks: Vec<usize> = text
        .split_inclusive('\n')
        .enumerate()
        .filter(|(_, l)| region(l))
        .map(|(i, _)| i)
        .collect();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (begin, end) = match marks.as_slice() {
        [b, e]
            if lines[*b].trim_end() == FEATURES_BEGIN && lines[*e].trim_end() == FEATURES_END =>
        {
            (*b, *e)
        }
        _ => {
            return Err(EmitError::Manifest {
                path,
                problem: format!(
                    "needs one line `{FEATURES_BEGIN}` and, after it, one line `{FEATURES_END}` in its [features] table"
                ),
            });
        }
    };
    let mut out: String = lines[..=begin].concat();
    for ctk in targets {
        out.push_str(&format!("{} = []\n", ctk.feature()));
    }
    let all: Vec<String> = targets
        .iter()
        .map(|c| format!("\"{}\"", c.feature()))
        .collect();
    out.push_str(&format!("all-targets = [{}]\n", all.join(", ")));
    out.push_str(&lines[end..].concat());
    Ok(GeneratedFile {
        path: PathBuf::from(MANIFEST),
        contents: out,
    })
}

/// Whether the file at `path` carries the seal marker, which makes it a generated file.
fn carries_seal(path: &Path) -> bool {
    let marker = hostcb_seal::marker().as_bytes();
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(marker.len()).any(|w| w == marker))
}

/// The sealed files under `root`'s bindings folder that `files` does not produce: what a full
/// regen deletes (targets removed from the list), relative to `root`, sorted.
pub fn unproduced_sealed_files(root: &Path, files: &[GeneratedFile]) -> Vec<PathBuf> {
    let produced: BTreeSet<&Path> = files.iter().map(|f| f.path.as_path()).collect();
    let mut out = Vec::new();
    let mut pending = vec![root.join(BINDINGS_DIR)];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            if kind.is_file() && !produced.contains(rel.as_path()) && carries_seal(&path) {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn header(ctk: Ctk, prefix: &str) -> String {
    format!(
        "{prefix} {GENERATED} by {GENERATOR} from the CTK {ctk} headers. Do not edit: regenerate with `cargo xtask regen --ctk {ctk}`.\n"
    )
}

/// Formats a Rust syntax tree and seals it as the file `name` of the target.
pub fn rust_file(ctk: Ctk, name: &str, file: &syn::File) -> Result<GeneratedFile, EmitError> {
    let body = prettyplease::unparse(file);
    seal_file(ctk, target_dir(ctk).join(name), "//", body)
}

/// The provenance manifest of one target: what generated it, from which inputs.
pub fn provenance_file(
    ctk: Ctk,
    inputs: &[Provenance],
    files: &[&GeneratedFile],
) -> Result<GeneratedFile, EmitError> {
    let mut body = String::new();
    body.push_str("# Provenance of the generated bindings of this target.\n\n");
    body.push_str(&format!(
        "[generator]\nname = \"hostcb-generator\"\nversion = \"{}\"\n\n",
        env!("CARGO_PKG_VERSION")
    ));
    body.push_str(&format!(
        "[target]\nctk = \"{ctk}\"\ncuda_version = {}\n",
        ctk.cuda_version()
    ));
    for p in inputs {
        body.push_str(&format!(
            "\n[[input]]\nname = \"{}\"\nversion = \"{}\"\nfile = \"{}\"\nsha256 = \"{}\"\n",
            p.name, p.version, p.file, p.sha256
        ));
    }
    for f in files {
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        body.push_str(&format!("\n[[file]]\npath = \"{name}\"\n"));
    }
    seal_file(ctk, target_dir(ctk).join("provenance.toml"), "#", body)
}

fn seal_file(
    ctk: Ctk,
    path: PathBuf,
    prefix: &str,
    body: String,
) -> Result<GeneratedFile, EmitError> {
    let unsealed = format!("{}{body}", header(ctk, prefix));
    let contents = hostcb_seal::seal(&unsealed, &ctk.to_string(), prefix).map_err(|source| {
        EmitError::Seal {
            path: path.clone(),
            source,
        }
    })?;
    Ok(GeneratedFile { path, contents })
}

/// What [`write_tree`] did.
#[derive(Debug, Default)]
pub struct WriteSummary {
    /// Files whose bytes changed (or that were new).
    pub written: Vec<PathBuf>,
    /// Files already identical.
    pub unchanged: Vec<PathBuf>,
    /// Temporary files ([`TEMP_PREFIX`]) an interrupted run left behind, removed.
    pub removed: Vec<PathBuf>,
    /// Sealed files no longer produced, deleted.
    pub deleted: Vec<PathBuf>,
}

/// Writes `files` under `root`: only those whose bytes differ, each through a temporary file in
/// its own folder, flushed to disk and renamed into place. Every temporary file is written before
/// the first rename, so an unwritable folder fails before anything is replaced. Temporary files
/// an interrupted run left in these folders are removed first; each folder written to is flushed
/// after the renames. Then the files of `delete` (relative to `root`: sealed files no longer
/// produced, from [`unproduced_sealed_files`]) are removed, and their folders if that empties
/// them.
pub fn write_tree(
    root: &Path,
    files: &[GeneratedFile],
    delete: &[PathBuf],
) -> Result<WriteSummary, EmitError> {
    let mut summary = WriteSummary::default();
    let dirs: BTreeSet<PathBuf> = files
        .iter()
        .map(|f| root.join(&f.path).parent().unwrap_or(root).to_path_buf())
        .collect();
    for dir in &dirs {
        for stale in remove_temporaries(dir)? {
            summary
                .removed
                .push(stale.strip_prefix(root).unwrap_or(&stale).to_path_buf());
        }
    }
    let mut staged = Vec::new();
    for f in files {
        let path = root.join(&f.path);
        if std::fs::read(&path).is_ok_and(|old| old == f.contents.as_bytes()) {
            summary.unchanged.push(f.path.clone());
            continue;
        }
        let dir = path.parent().unwrap_or(root);
        let write_err = |source| EmitError::Write {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write_err)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(dir)
            .map_err(write_err)?;
        std::io::Write::write_all(&mut tmp, f.contents.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|source| EmitError::Write {
                path: tmp.path().to_path_buf(),
                source,
            })?;
        staged.push((tmp, path, f.path.clone()));
    }
    let mut renamed_in = BTreeSet::new();
    for (tmp, path, rel) in staged {
        tmp.persist(&path).map_err(|e| EmitError::Write {
            path: path.clone(),
            source: e.error,
        })?;
        renamed_in.insert(path.parent().unwrap_or(root).to_path_buf());
        summary.written.push(rel);
    }
    for rel in delete {
        let path = root.join(rel);
        std::fs::remove_file(&path).map_err(|source| EmitError::Write {
            path: path.clone(),
            source,
        })?;
        let dir = path.parent().unwrap_or(root);
        // Only an emptied folder goes; `remove_dir` refuses one that still holds anything.
        if std::fs::remove_dir(dir).is_ok() {
            renamed_in.remove(dir);
            renamed_in.insert(dir.parent().unwrap_or(root).to_path_buf());
        } else {
            renamed_in.insert(dir.to_path_buf());
        }
        summary.deleted.push(rel.clone());
    }
    renamed_in.retain(|dir| dir.is_dir());
    for dir in renamed_in {
        sync_dir(&dir).map_err(|source| EmitError::Write { path: dir, source })?;
    }
    Ok(summary)
}

/// Removes the temporary files ([`TEMP_PREFIX`]) in `dir` (not below it), if it exists; returns
/// their paths.
fn remove_temporaries(dir: &Path) -> Result<Vec<PathBuf>, EmitError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EmitError::Write { path, source }
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(write_err(dir)(e)),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(write_err(dir))?;
        let is_dir = entry.file_type().map_err(write_err(dir))?.is_dir();
        if is_dir
            || !entry
                .file_name()
                .as_encoded_bytes()
                .starts_with(TEMP_PREFIX.as_bytes())
        {
            continue;
        }
        let path = entry.path();
        std::fs::remove_file(&path).map_err(write_err(&path))?;
        removed.push(path);
    }
    removed.sort();
    Ok(removed)
}

/// Flushes `dir` itself (the names renamed into it) to disk, where the platform can.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// One difference between committed and regenerated output.
#[derive(Debug)]
pub struct Difference {
    /// The file, relative to the generated crate's root.
    pub path: PathBuf,
    /// A short unified diff (committed → regenerated), or why there is none.
    pub diff: String,
}

/// Compares `files` with what is under `root`, byte for byte.
pub fn diff_tree(root: &Path, files: &[GeneratedFile], max_lines: usize) -> Vec<Difference> {
    let mut out = Vec::new();
    for f in files {
        let path = root.join(&f.path);
        let old = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => {
                out.push(Difference {
                    path: f.path.clone(),
                    diff: "missing: not committed".to_owned(),
                });
                continue;
            }
        };
        if old == f.contents.as_bytes() {
            continue;
        }
        let old = String::from_utf8_lossy(&old);
        let diff = similar::TextDiff::from_lines(old.as_ref(), f.contents.as_str())
            .unified_diff()
            .context_radius(2)
            .header("committed", "regenerated")
            .to_string();
        let mut lines: Vec<&str> = diff.lines().collect();
        let total = lines.len();
        lines.truncate(max_lines);
        let mut diff = lines.join("\n");
        if total > max_lines {
            diff.push_str(&format!("\n... ({} more diff lines)", total - max_lines));
        }
        out.push(Difference {
            path: f.path.clone(),
            diff,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn write_tree_removes_stale_temporaries_in_the_folders_it_writes() {
        let out = tempfile::tempdir().unwrap();
        let root = out.path();
        let driver = seal_file(
            Ctk::V12_9,
            target_dir(Ctk::V12_9).join("driver.rs"),
            "//",
            "pub fn d() {}\n".to_owned(),
        )
        .unwrap();
        let dir = root.join(target_dir(Ctk::V12_9));
        let other = root.join("src/other");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        // A regen killed while writing its temporary file; another folder's file of that name is
        // not regen's to remove.
        let half = &driver.contents[..driver.contents.len() / 2];
        std::fs::write(dir.join(".regen-AbC123"), half).unwrap();
        std::fs::write(other.join(".regen-keep"), half).unwrap();

        let summary = write_tree(root, std::slice::from_ref(&driver), &[]).unwrap();
        assert_eq!(summary.written, std::slice::from_ref(&driver.path));
        assert_eq!(
            summary.removed,
            [target_dir(Ctk::V12_9).join(".regen-AbC123")]
        );
        assert_eq!(names_in(&dir), ["driver.rs"]);
        assert_eq!(names_in(&other), [".regen-keep"]);

        // Also when nothing needs writing.
        std::fs::write(dir.join(".regen-XyZ789"), half).unwrap();
        let summary = write_tree(root, std::slice::from_ref(&driver), &[]).unwrap();
        assert!(summary.written.is_empty());
        assert_eq!(names_in(&dir), ["driver.rs"]);
    }

    #[test]
    fn sealed_files_are_the_module_list_and_every_targets_five_files() {
        let targets = [Ctk::V12_9, Ctk::new(13, 2)];
        let files = sealed_files(&targets);
        assert_eq!(files.len(), 1 + 5 * targets.len());
        assert_eq!(files[0], Path::new("src/bindings/mod.rs"));
        for ctk in targets {
            for name in [
                "mod.rs",
                "driver.rs",
                "runtime.rs",
                "layout.rs",
                "provenance.toml",
            ] {
                let path = Path::new("src/bindings").join(ctk.module()).join(name);
                assert!(files.contains(&path), "{}", path.display());
            }
        }
    }

    #[test]
    fn verify_skips_temp_files_with_the_prefix_write_tree_uses() {
        assert_eq!(
            hostcb_seal::VerifyOptions::default().temp_prefix.as_deref(),
            Some(TEMP_PREFIX)
        );
    }
}
