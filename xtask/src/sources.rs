//! The sources this binary is built from, as one SHA-256, so that it can tell when it runs in a
//! checkout whose sources differ from the ones it was built from.
//!
//! Two checkouts that share one `CARGO_TARGET_DIR` share one `target/debug/xtask`: cargo's
//! freshness check compares file times, so after a build in checkout A, `cargo xtask` in an
//! older checkout B can run A's binary, that is A's generator, on B's files. The build script
//! records this hash of the sources it was built from; `main` hashes the checkout's sources
//! again and, on a difference, has cargo rebuild from the checkout's own (see `main.rs`).
//!
//! This file is also the build script's (`build.rs` includes it with `#[path]`), so both
//! hash the same way.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The folders, relative to the workspace root, whose files are compiled into this binary: its
/// own and those of the workspace crates it links.
pub const SOURCE_DIRS: [&str; 3] = ["xtask/src", "generator/src", "generator/seal/src"];

/// The SHA-256 (hex) of every file under [`SOURCE_DIRS`] of `root`, each with its path and
/// length, in path order.
pub fn sources_sha256(root: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        collect(&root.join(dir), &mut files)?;
    }
    files.sort();
    let mut hash = Sha256::new();
    for file in files {
        let bytes = std::fs::read(&file)?;
        let rel = file.strip_prefix(root).unwrap_or(&file);
        hash.update(rel.to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(&entry.path(), files)?;
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
    Ok(())
}
