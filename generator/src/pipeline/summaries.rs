//! The summary cache: what the all-target files need of each target's model
//! ([`Summary`]), kept under `<cache>/summaries/` so that `regen --ctk X` need not download and
//! read the other listed targets' headers again.
//!
//! A summary is a function of the target's pinned wheels, libclang (and gcc's include folder,
//! which clang reads), the deny-lists and the generator's own sources; its file is named by the
//! SHA-256 of all of them, computed without reading any wheel, so an input that changes misses
//! the cache instead of reading a stale entry. A file ends with the SHA-256 of its text, so a
//! truncated or damaged one is read again from the headers, never used. A store deletes the
//! target's other entries but the three most recently used (a load or a store of the same bytes
//! marks an entry used): every change to the generator's sources is a new key.
//!
//! The cache is a folder that other checkouts and CI jobs may share and write: it roots nothing.
//! Its key and trailing checksum only find an entry and catch damage; anyone who can write the
//! folder can write a well-formed entry under the right name. So an entry is used only when the
//! SHA-256 of its text is the one that the target's committed, sealed `provenance.toml` records
//! ([`crate::emit::render::sealed_summary_sha256`]), which the regen that generated the target from its
//! hash-checked headers wrote; every other entry is ignored with a warning, and the headers are
//! read again. Only `regen` reads the cache ([`super::Others::Cached`]); `check` always reads
//! every listed target's headers.
//!
//! What it saves, measured on 2 cores (`target/debug/xtask regen --ctk 12.9` of 3 listed
//! targets, median of 5 runs each, `<cache>/summaries/` kept or emptied before each run): 1.88 s
//! against 2.07 s (x1.10) with the second core idle, 1.90 s against 3.41 s (x1.79) beside
//! another build, and 1.88 s against 3.57 s of CPU (x1.90); `regen --ctk all` and `check` are
//! unchanged (3.70 s either way).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::Ctk;
use crate::config::Config;
use crate::inputs::{hex, sha256_hex};
use crate::model::Summary;

/// The version of the file format and of what a summary holds.
const FORMAT: &str = "hostcb-summary-v3";

/// The summary cache of one configuration: what every key shares, computed once.
pub struct Cache<'a> {
    config: &'a Config,
    /// The hash state over what every target's summary depends on.
    common: Sha256,
}

impl<'a> Cache<'a> {
    /// The cache of `config`, or `None` where nothing is cached: under a `LIBCLANG_PATH`
    /// override (its library is not pinned), or without the pinned libclang or gcc.
    pub fn new(config: &'a Config) -> Option<Cache<'a>> {
        if config.inputs.libclang_path.is_some() {
            return None;
        }
        let libclang = config.lock().get(crate::inputs::LIBCLANG_SPEC).ok()?;
        let mut common = Sha256::new();
        for text in [
            FORMAT,
            crate::BUILT_FROM_SOURCES,
            &libclang.sha256,
            &crate::inputs::gcc_include_args().ok()?.join("\n"),
            &format!("{:?}", config.driver_list),
            &format!("{:?}", config.runtime_list),
        ] {
            part(&mut common, text);
        }
        Some(Cache { config, common })
    }

    /// The cache file of `ctk`, named by the SHA-256 of everything its summary depends on (no
    /// wheel is read for it), or `None` for a target the lock does not pin.
    pub fn path(&self, ctk: Ctk) -> Option<PathBuf> {
        let lock = self.config.lock();
        let mut key = self.common.clone();
        part(&mut key, &ctk.to_string());
        // The target's own wheels, and the runtime headers of the older targets of its major
        // (each runtime function's version comes from them, see crate::history).
        for spec in lock.specs_read_by(ctk).ok()? {
            let entry = lock.get(&spec).ok()?;
            part(&mut key, &entry.spec());
            part(&mut key, &entry.sha256);
        }
        let key = hex(&key.finalize()[..12]);
        Some(
            self.config
                .cache()
                .join("summaries")
                .join(format!("{}-{key}.txt", ctk.module())),
        )
    }

    /// The cached summary of `ctk`, when there is one and the committed, sealed provenance of
    /// `ctk` in the generated crate records its SHA-256: `Ok(None)` where there is none or
    /// nothing sealed records one, `Err` (a warning naming the file) for an entry that is
    /// there but is not used.
    pub(super) fn load(&self, ctk: Ctk) -> Result<Option<Summary>, String> {
        let Some(path) = self.path(ctk) else {
            return Ok(None);
        };
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(None);
        };
        let Some(sealed) = crate::emit::render::sealed_summary_sha256(&self.config.out, ctk) else {
            return Ok(None);
        };
        let ignored = |why: String| {
            format!(
                "ignored the cached summary of CTK {ctk} at {}: {why}; read its pinned headers instead",
                path.display()
            )
        };
        let Some((body, _)) = text.rsplit_once("sha256 ").filter(|(body, trailer)| {
            trailer.strip_suffix('\n') == Some(&sha256_hex(body.as_bytes()))
        }) else {
            return Err(ignored(
                "the file is damaged (its trailing SHA-256 does not match its text)".to_owned(),
            ));
        };
        let digest = sha256_hex(body.as_bytes());
        if digest != sealed {
            let provenance = self
                .config
                .out
                .join(crate::emit::target_dir(ctk))
                .join(crate::emit::PROVENANCE);
            return Err(ignored(format!(
                "its SHA-256 {} is not the {} that the sealed {} records",
                &digest[..12],
                &sealed[..12],
                provenance.display()
            )));
        }
        let summary = Summary::from_text(ctk, body)
            .ok_or_else(|| ignored("its text is not a summary".to_owned()))?;
        used(&path);
        Ok(Some(summary))
    }

    /// Caches `summary`: written to a temporary file beside its place, then renamed into it, so
    /// a reader never sees half a file. Returns a warning when it cannot.
    pub(super) fn store(&self, summary: &Summary) -> Option<String> {
        let path = self.path(summary.ctk)?;
        let dir = path.parent()?;
        let body = summary.to_text();
        let text = format!("{body}sha256 {}\n", sha256_hex(body.as_bytes()));
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            used(&path);
            return None;
        }
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| tempfile::NamedTempFile::new_in(dir))
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.persist(&path).map_err(|e| e.error)?;
                Ok(())
            });
        if written.is_ok() {
            prune(dir, &format!("{}-", summary.ctk.module()), &path);
        }
        written.err().map(|e| {
            format!(
                "cannot cache the summary of CTK {} at {}: {e} (a later `regen --ctk X` reads its headers again)",
                summary.ctk,
                path.display()
            )
        })
    }
}

/// How many summaries of one target the cache keeps: the one a run stores and the most recently
/// used others (another checkout's, a maintenance branch's). Each is about 1 MB, and every change
/// to the generator's sources is a new key, so the folder grew by some 3 MB per edit and regen of
/// three targets (291 files, 294 MB, in one checkout's cache after a day of work).
const KEPT_PER_TARGET: usize = 4;

/// Marks a cache file as used now, which [`prune`] goes by (best effort: a file another user
/// owns keeps its time).
fn used(path: &Path) {
    let _ = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()));
}

/// Deletes the files of `dir` named `<prefix>*.txt` but `stored` and the [`KEPT_PER_TARGET`]` - 1`
/// most recently used others. Best effort: a file another process deletes or replaces first,
/// or one this user may not delete, is left to it.
fn prune(dir: &Path, prefix: &str, stored: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut others: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            let ours = name.starts_with(prefix) && name.ends_with(".txt");
            let modified = entry.metadata().ok()?.modified().ok()?;
            (ours && entry.path() != stored).then(|| (modified, entry.path()))
        })
        .collect();
    others.sort_by(|a, b| b.cmp(a));
    for (_, path) in others.into_iter().skip(KEPT_PER_TARGET - 1) {
        let _ = std::fs::remove_file(path);
    }
}

/// Adds one length-prefixed part to a key.
fn part(key: &mut Sha256, text: &str) {
    key.update((text.len() as u64).to_le_bytes());
    key.update(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_keeps_the_most_recently_used_summaries_of_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, age: u64| {
            let path = dir.path().join(name);
            let file = std::fs::File::create(&path).unwrap();
            let when = SystemTime::now() - std::time::Duration::from_secs(age);
            file.set_modified(when).unwrap();
            path
        };
        let stored = file("ctk_13_0-new.txt", 100);
        for (name, age) in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)] {
            file(&format!("ctk_13_0-{name}.txt"), age);
        }
        file("ctk_13_5-z.txt", 9);
        file("ctk_13_0-tmp", 9);
        prune(dir.path(), "ctk_13_0-", &stored);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "ctk_13_0-a.txt",
                "ctk_13_0-b.txt",
                "ctk_13_0-c.txt",
                "ctk_13_0-new.txt",
                "ctk_13_0-tmp",
                "ctk_13_5-z.txt"
            ]
        );
        used(&dir.path().join("ctk_13_0-c.txt"));
        file("ctk_13_0-x.txt", 0);
        prune(dir.path(), "ctk_13_0-", &stored);
        assert!(dir.path().join("ctk_13_0-c.txt").exists());
        assert!(!dir.path().join("ctk_13_0-b.txt").exists());
    }
}
