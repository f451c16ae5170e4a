//! The SHA-256 of a crate's own sources, recorded when the crate is built, so that a binary can
//! tell whether each workspace crate linked into it was built from the checkout it runs in.
//!
//! Two checkouts that share one `CARGO_TARGET_DIR` share one set of workspace-crate artifacts:
//! cargo names those of a path package by its place in the workspace and finds them fresh by
//! file times, so after a build in checkout A, a build in an older checkout B can link A's
//! rlibs. Each crate's build script records the hash of the `src/` it is built with (see
//! [`record`]), and the crate exposes it as `BUILT_FROM_SOURCES`; a binary compares each with
//! [`sources_sha256`] of that crate's folder in its own checkout.
//!
//! The hash stays true to the code: the build script reruns whenever a file under `src/` is newer
//! than its last run, and cargo recompiles the crate whenever its build script reruns. This file
//! is also this crate's build script's (`build.rs` includes it with `#[path]`); the other crates'
//! build scripts use it through a build-dependency, so every crate hashes the same way.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The folder, relative to a crate's manifest folder, whose files are hashed.
pub const SOURCE_DIR: &str = "src";

/// The SHA-256 (hex) of every file under `crate_dir/src/` (following links, skipping names that
/// start with `.`, such as editors' swap files), each with its path relative to `crate_dir` and
/// its length, in path order.
pub fn sources_sha256(crate_dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect(&crate_dir.join(SOURCE_DIR), &mut files)?;
    files.sort();
    let mut hash = Sha256::new();
    for file in files {
        let bytes = std::fs::read(&file)?;
        let rel = file.strip_prefix(crate_dir).unwrap_or(&file);
        for part in rel.components() {
            hash.update(part.as_os_str().as_encoded_bytes());
            hash.update(b"/");
        }
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            collect(&path, files)?;
        } else if meta.is_file() {
            files.push(path);
        }
    }
    Ok(())
}

/// For a build script: records the hash of the crate's `src/` as the compile-time variable
/// `HOSTCB_BUILT_FROM_SOURCES`, and has cargo run the script again whenever a file there changes.
///
/// # Panics
///
/// When cargo did not set `CARGO_MANIFEST_DIR` or the sources cannot be read: the build fails.
pub fn record() {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let hash = sources_sha256(Path::new(&dir)).expect("the crate's sources are readable");
    println!("cargo::rerun-if-changed={SOURCE_DIR}");
    println!("cargo::rustc-env=HOSTCB_BUILT_FROM_SOURCES={hash}");
}
