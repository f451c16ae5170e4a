//! The summary cache: what the all-target files need of each target's model
//! ([`Summary`]), kept under `<cache>/summaries/` so that `regen --ctk X` need not download and
//! read the other listed targets' headers again.
//!
//! A summary is a function of the target's pinned wheels, libclang (and gcc's include folder,
//! which clang reads), the deny-lists and the generator's own sources; its file is named by the
//! SHA-256 of all of them, computed without reading any wheel, so an input that changes misses
//! the cache instead of reading a stale entry. A file ends with the SHA-256 of its text, so a
//! truncated or damaged one is read again from the headers, never used.
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
use std::path::PathBuf;

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
        Summary::from_text(ctk, body)
            .map(Some)
            .ok_or_else(|| ignored("its text is not a summary".to_owned()))
    }

    /// Caches `summary`: written to a temporary file beside its place, then renamed into it, so
    /// a reader never sees half a file. Returns a warning when it cannot.
    pub(super) fn store(&self, summary: &Summary) -> Option<String> {
        let path = self.path(summary.ctk)?;
        let dir = path.parent()?;
        let body = summary.to_text();
        let text = format!("{body}sha256 {}\n", sha256_hex(body.as_bytes()));
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
}

/// Adds one length-prefixed part to a key.
fn part(key: &mut Sha256, text: &str) {
    key.update((text.len() as u64).to_le_bytes());
    key.update(text.as_bytes());
}
