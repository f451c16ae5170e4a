//! Emitting: formats the written syntax trees with prettyplease, adds the generated-file header
//! and the seal, and writes the tree: only files whose bytes change, each atomically, and all of
//! them staged before any is replaced, so a failed write leaves every existing file as it was.

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

/// The folder of one target's files, relative to the generated crate's root.
pub fn target_dir(ctk: Ctk) -> PathBuf {
    Path::new("src/bindings").join(ctk.module())
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
}

/// Writes `files` under `root`: only those whose bytes differ, each through a temporary file in
/// its own folder renamed into place. Every temporary file is written before the first rename, so
/// an unwritable folder fails before anything is replaced.
pub fn write_tree(root: &Path, files: &[GeneratedFile]) -> Result<WriteSummary, EmitError> {
    let mut summary = WriteSummary::default();
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
            .prefix(".regen-")
            .tempfile_in(dir)
            .map_err(write_err)?;
        std::io::Write::write_all(&mut tmp, f.contents.as_bytes()).map_err(|source| {
            EmitError::Write {
                path: tmp.path().to_path_buf(),
                source,
            }
        })?;
        staged.push((tmp, path, f.path.clone()));
    }
    for (tmp, path, rel) in staged {
        tmp.persist(&path).map_err(|e| EmitError::Write {
            path: path.clone(),
            source: e.error,
        })?;
        summary.written.push(rel);
    }
    Ok(summary)
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
