//! Emitting: [`render`] seals the written files' text as the generated crate's files, [`tree`]
//! writes them under the output folder (or compares them, for `check`). Here: the unit they
//! pass on ([`GeneratedFile`]), where the files lie in the generated crate, and why emitting
//! fails. The crate's `Cargo.toml` features are [`crate::manifest`]'s.

use std::path::{Path, PathBuf};

use crate::Ctk;

pub mod render;
pub mod tree;

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
    /// A symbolic link where the output tree is written or read.
    #[error(
        "{} is a symbolic link; regen writes nothing through a link under the output folder: replace it with a real folder or file (nothing was changed)",
        path.display()
    )]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// Something other than a regular file where a generated file (or the manifest) should be.
    #[error(
        "{} is {kind}, not a regular file; remove it and run the command again (nothing was changed)",
        path.display()
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is (`a FIFO`, `a folder`, ...).
        kind: &'static str,
    },
    /// A file cannot be replaced or deleted, or a folder flushed, after others were replaced.
    #[error(
        "cannot write {path}: {source}; regen stopped midway, so the files it replaced before this one are new and the others old: fix the cause and run the regen again"
    )]
    Midway {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
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

/// The sealed files in each target's folder.
pub const TARGET_FILES: [&str; 5] = ["mod.rs", "driver.rs", "runtime.rs", "layout.rs", PROVENANCE];

/// The file name of a target's provenance manifest, in its folder ([`target_dir`]).
pub const PROVENANCE: &str = "provenance.toml";

/// The folder of every target's folder, relative to the generated crate's root.
pub const BINDINGS_DIR: &str = "src/bindings";

/// The sealed module list of the generated crate, relative to its root: one module per target,
/// and the `for_each_target!` macro.
pub const BINDINGS_MOD: &str = "src/bindings/mod.rs";

/// The sealed module of the types every target shares ([`crate::shared`]), relative to the
/// generated crate's root.
pub const COMMON: &str = "src/bindings/common.rs";

/// The folder of one target's files, relative to the generated crate's root.
pub fn target_dir(ctk: Ctk) -> PathBuf {
    Path::new(BINDINGS_DIR).join(ctk.module())
}

/// Every sealed file of `targets`, relative to the generated crate's root:
/// `src/bindings/{mod.rs,common.rs}` and `src/bindings/<module>/{mod.rs,driver.rs,runtime.rs,layout.rs,provenance.toml}`.
/// What `cargo xtask verify` expects to find.
pub fn sealed_files(targets: &[Ctk]) -> Vec<PathBuf> {
    [BINDINGS_MOD, COMMON]
        .into_iter()
        .map(PathBuf::from)
        .chain(
            targets
                .iter()
                .flat_map(|&ctk| TARGET_FILES.map(|name| target_dir(ctk).join(name))),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_files_are_the_module_list_the_shared_types_and_every_targets_five_files() {
        let targets = [Ctk::V12_9, Ctk::new(13, 2)];
        let files = sealed_files(&targets);
        assert_eq!(files.len(), 2 + 5 * targets.len());
        assert_eq!(files[0], Path::new("src/bindings/mod.rs"));
        assert_eq!(files[1], Path::new("src/bindings/common.rs"));
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
}
