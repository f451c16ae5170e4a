//! The summary cache: what the all-target files need of each target's model
//! ([`Summary`]), kept under `<cache>/summaries/` so that `regen --ctk X` need not download and
//! read the other listed targets' headers again.
//!
//! A summary is a function of the target's pinned wheels, libclang (and gcc's include folder,
//! which clang reads), the deny-lists and the generator's own sources; its file is named by the
//! SHA-256 of all of them, computed without reading any wheel, so an input that changes misses
//! the cache instead of reading a stale entry. A file ends with the SHA-256 of its text, so a
//! truncated or damaged one is read again from the headers, never used. Only `regen` reads the
//! cache ([`super::Others::Cached`]); `check` always reads every listed target's headers, so a
//! cache that lies cannot make it pass.

use std::io::Write;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::Ctk;
use crate::config::Config;
use crate::model::Summary;

/// The version of the file format and of what a summary holds.
const FORMAT: &str = "hostcb-summary-v1";

/// The cache file of `ctk` under `config`, or `None` where nothing is cached: a `LIBCLANG_PATH`
/// override (its library is not pinned), a target the lock does not pin, or no gcc.
pub fn path(config: &Config, ctk: Ctk) -> Option<PathBuf> {
    if config.inputs.libclang_path.is_some() {
        return None;
    }
    let lock = &config.inputs.lock;
    let target = lock.target(ctk).ok()?;
    let mut key = Sha256::new();
    let mut part = |text: &str| {
        key.update((text.len() as u64).to_le_bytes());
        key.update(text.as_bytes());
    };
    part(FORMAT);
    part(crate::BUILT_FROM_SOURCES);
    part(&ctk.to_string());
    for spec in [&target.headers, &target.crt] {
        let entry = lock.get(spec).ok()?;
        part(&entry.spec());
        part(&entry.sha256);
    }
    let libclang = lock.get(crate::inputs::LIBCLANG_SPEC).ok()?;
    part(&libclang.sha256);
    part(&crate::inputs::gcc_include_args().ok()?.join("\n"));
    part(&format!("{:?}", config.driver_list));
    part(&format!("{:?}", config.runtime_list));
    let key: String = key.finalize()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(
        config
            .cache()
            .join("summaries")
            .join(format!("{}-{key}.txt", ctk.module())),
    )
}

/// The cached summary of `ctk`, if there is one whose text is whole.
pub(super) fn load(config: &Config, ctk: Ctk) -> Option<Summary> {
    let text = std::fs::read_to_string(path(config, ctk)?).ok()?;
    let (body, trailer) = text.rsplit_once("sha256 ")?;
    if trailer.strip_suffix('\n')? != hex(&Sha256::digest(body.as_bytes())) {
        return None;
    }
    Summary::from_text(ctk, body)
}

/// Caches `summary`: written to a temporary file beside its place, then renamed into it, so a
/// reader never sees half a file. Returns a warning when it cannot.
pub(super) fn store(config: &Config, summary: &Summary) -> Option<String> {
    let path = path(config, summary.ctk)?;
    let dir = path.parent()?;
    let body = summary.to_text();
    let text = format!("{body}sha256 {}\n", hex(&Sha256::digest(body.as_bytes())));
    if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
        return None;
    }
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| tempfile::NamedTempFile::new_in(dir))
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.persist(&path).map_err(|e| e.error)?;
            Ok(())
        });
    written.err().map(|e| {
        format!(
            "cannot cache the summary of CTK {} at {}: {e} (a later `regen --ctk X` reads its headers again)",
            summary.ctk,
            path.display()
        )
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
