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
pub const TARGET_FILES: [&str; 3] = ["driver.rs", "runtime.rs", "provenance.toml"];

/// The folder of one target's files, relative to the generated crate's root.
pub fn target_dir(ctk: Ctk) -> PathBuf {
    Path::new("src/bindings").join(ctk.module())
}

/// Every sealed file of every target ([`Ctk::ALL`]), relative to the generated crate's root:
/// `src/bindings/<module>/{driver.rs,runtime.rs,provenance.toml}`. What `cargo xtask verify`
/// expects to find.
pub fn sealed_files() -> Vec<PathBuf> {
    Ctk::ALL
        .into_iter()
        .flat_map(|ctk| TARGET_FILES.map(|name| target_dir(ctk).join(name)))
        .collect()
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
    let contents =
        hostcb_seal::seal(&unsealed, ctk.as_str(), prefix).map_err(|source| EmitError::Seal {
            path: path.clone(),
            source,
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
}

/// Writes `files` under `root`: only those whose bytes differ, each through a temporary file in
/// its own folder, flushed to disk and renamed into place. Every temporary file is written before
/// the first rename, so an unwritable folder fails before anything is replaced. Temporary files
/// an interrupted run left in these folders are removed first; each folder written to is flushed
/// after the renames.
pub fn write_tree(root: &Path, files: &[GeneratedFile]) -> Result<WriteSummary, EmitError> {
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

        let summary = write_tree(root, std::slice::from_ref(&driver)).unwrap();
        assert_eq!(summary.written, std::slice::from_ref(&driver.path));
        assert_eq!(
            summary.removed,
            [target_dir(Ctk::V12_9).join(".regen-AbC123")]
        );
        assert_eq!(names_in(&dir), ["driver.rs"]);
        assert_eq!(names_in(&other), [".regen-keep"]);

        // Also when nothing needs writing.
        std::fs::write(dir.join(".regen-XyZ789"), half).unwrap();
        let summary = write_tree(root, std::slice::from_ref(&driver)).unwrap();
        assert!(summary.written.is_empty());
        assert_eq!(names_in(&dir), ["driver.rs"]);
    }

    #[test]
    fn sealed_files_are_every_targets_three_files() {
        let files = sealed_files();
        assert_eq!(files.len(), 3 * Ctk::ALL.len());
        assert_eq!(files[0], Path::new("src/bindings/ctk_12_9/driver.rs"));
        for ctk in Ctk::ALL {
            for name in ["driver.rs", "runtime.rs", "provenance.toml"] {
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
