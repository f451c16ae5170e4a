//! Emitting: formats the written syntax trees with prettyplease, adds the generated-file header
//! and the seal, and writes or checks the tree ([`ensure_tree`]): under a lock on the output
//! folder, only files whose bytes change, each atomically, all of them staged before any is
//! replaced (a failed write leaves every existing file as it was), never through a symbolic link
//! and never opening anything but a regular file; it deletes only sealed files it can prove it
//! wrote.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::Ctk;
use crate::inputs::Provenance;

/// Spelled with an escape so that the generator's own source never looks generated.
const GENERATED: &str = "\x40generated";

/// The generator's package name.
pub const GENERATOR_NAME: &str = "hostcb-generator";

/// The generator's version (the same in every checkout of one release: it does not tell two
/// generators apart; [`crate::BUILT_FROM_SOURCES`] does).
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which generator makes the files, as their headers record it: its name, its version and the
/// SHA-256 of the sources it was compiled from ([`crate::BUILT_FROM_SOURCES`]), e.g.
/// `hostcb-generator 0.1.0 (sources sha256 3f2a...)`. Every change under `generator/src/`
/// changes it, so a generator change rewrites every generated file, and `cargo xtask check` can
/// tell files that another checkout's generator made.
pub const GENERATOR: &str = concat!(
    "hostcb-generator ",
    env!("CARGO_PKG_VERSION"),
    " (sources sha256 ",
    env!("HOSTCB_BUILT_FROM_SOURCES"),
    ")"
);

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

/// The name prefix of the temporary files [`ensure_tree`] stages beside their targets. A killed
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

/// The sealed module of the types every target shares ([`crate::shared`]), relative to the
/// generated crate's root.
pub const COMMON: &str = "src/bindings/common.rs";

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

/// The sealed `src/bindings/mod.rs` of `targets`, from the writer's syntax tree.
pub fn bindings_mod(file: &syn::File) -> Result<GeneratedFile, EmitError> {
    all_targets(BINDINGS_MOD, file)
}

/// The sealed `src/bindings/common.rs` of `targets`, from the writer's syntax tree.
pub fn common(file: &syn::File) -> Result<GeneratedFile, EmitError> {
    all_targets(COMMON, file)
}

/// A sealed file made from every listed target.
fn all_targets(path: &str, file: &syn::File) -> Result<GeneratedFile, EmitError> {
    let header = format!(
        "// {GENERATED} by {GENERATOR} from generator/targets.txt. Do not edit: regenerate with `cargo xtask regen --ctk all`.\n"
    );
    let unsealed = format!("{header}{}", prettyplease::unparse(file));
    let path = PathBuf::from(path);
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
    let (text, begin, end) = manifest_features(root)?;
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
        path: PathBuf::from(MANIFEST),
        contents: out,
    })
}

/// The targets whose features the generated features of the generated crate's `Cargo.toml`
/// under `root` declare (`ctk-<major>-<minor> = ...` between [`FEATURES_BEGIN`] and
/// [`FEATURES_END`]), oldest first: the target list of a generated crate that lies in no
/// checkout with a `generator/targets.txt` (what `regen --out` writes for such a folder).
pub fn manifest_targets(root: &Path) -> Result<Vec<Ctk>, EmitError> {
    let (text, begin, end) = manifest_features(root)?;
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
            path: root.join(MANIFEST),
            problem: format!(
                "declares no `ctk-<major>-<minor>` feature between `{FEATURES_BEGIN}` and `{FEATURES_END}`, so it names no target to write"
            ),
        });
    }
    Ok(targets)
}

/// The text of the generated crate's `Cargo.toml` under `root` and the line numbers (0-based)
/// of its [`FEATURES_BEGIN`] and [`FEATURES_END`] lines.
fn manifest_features(root: &Path) -> Result<(String, usize, usize), EmitError> {
    let path = root.join(MANIFEST);
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

/// Which generator made a generated file, as its header line records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedGenerator {
    /// The generator's version.
    pub version: String,
    /// The SHA-256 of the generator's sources; `None` for a file made before generators
    /// recorded it.
    pub sources: Option<String>,
}

impl RecordedGenerator {
    /// The generator running now.
    pub fn this() -> Self {
        RecordedGenerator {
            version: GENERATOR_VERSION.to_owned(),
            sources: Some(crate::BUILT_FROM_SOURCES.to_owned()),
        }
    }

    /// Reads the header line of a generated file (its first line): `None` when it is not the
    /// header this generator writes.
    pub fn of_file(contents: &[u8]) -> Option<Self> {
        let first = contents.split(|b| *b == b'\n').next()?;
        let first = std::str::from_utf8(first).ok()?;
        let by = format!("{GENERATED} by {GENERATOR_NAME} ");
        let rest = &first[first.find(&by)? + by.len()..];
        let (version, rest) = rest.split_once(' ')?;
        let sources = rest
            .strip_prefix("(sources sha256 ")
            .and_then(|r| r.split_once(')'))
            .map(|(hash, _)| hash.to_owned());
        Some(RecordedGenerator {
            version: version.to_owned(),
            sources,
        })
    }
}

impl std::fmt::Display for RecordedGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.sources {
            Some(hash) => write!(
                f,
                "{GENERATOR_NAME} {} (sources sha256 {hash})",
                self.version
            ),
            None => write!(
                f,
                "{GENERATOR_NAME} {} (of sources it did not record)",
                self.version
            ),
        }
    }
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

/// The file name of a target's provenance manifest, in its folder ([`target_dir`]).
pub const PROVENANCE: &str = "provenance.toml";

/// The provenance manifest of one target: what generated it, from which inputs, and the SHA-256
/// of its summary's text (`[summary]`, [`crate::model::Summary::to_text`]): the one summary of
/// the target that a later `regen --ctk X` may take from the input cache
/// ([`sealed_summary_sha256`]).
pub fn provenance_file(
    ctk: Ctk,
    inputs: &[Provenance],
    files: &[&GeneratedFile],
    summary_sha256: &str,
) -> Result<GeneratedFile, EmitError> {
    let mut body = String::new();
    body.push_str("# Provenance of the generated bindings of this target.\n\n");
    body.push_str(&format!(
        "[generator]\nname = \"{GENERATOR_NAME}\"\nversion = \"{GENERATOR_VERSION}\"\nsources_sha256 = \"{}\"\n\n",
        crate::BUILT_FROM_SOURCES
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
    body.push_str(&format!("{SUMMARY_SECTION}{summary_sha256}\"\n"));
    seal_file(ctk, target_dir(ctk).join(PROVENANCE), "#", body)
}

/// How the summary's digest is written in a provenance manifest, up to the digest.
const SUMMARY_SECTION: &str = "\n[summary]\nsha256 = \"";

/// The SHA-256 of the summary that the sealed provenance manifest of `ctk` in the generated crate
/// at `root` records, when that file is there, its seal checks and names `ctk`, and it records
/// one; `None` otherwise. What vouches for a cached summary: the repository's own sealed file,
/// never the cache that holds the summary.
pub fn sealed_summary_sha256(root: &Path, ctk: Ctk) -> Option<String> {
    let bytes = std::fs::read(root.join(target_dir(ctk)).join(PROVENANCE)).ok()?;
    let seal = hostcb_seal::check_contents(&bytes).ok()?;
    if seal.ctk != ctk.to_string() {
        return None;
    }
    summary_sha256_of(std::str::from_utf8(&bytes).ok()?)
}

/// The digest after the one [`SUMMARY_SECTION`] of a provenance manifest's text.
fn summary_sha256_of(text: &str) -> Option<String> {
    let mut sections = text.match_indices(SUMMARY_SECTION);
    let (at, _) = sections.next()?;
    if sections.next().is_some() {
        return None;
    }
    let rest = &text[at + SUMMARY_SECTION.len()..];
    let (digest, after) = rest.split_once('"')?;
    (digest.len() == 64
        && digest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && after.starts_with('\n'))
    .then(|| digest.to_owned())
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

/// Whether [`ensure_tree`] writes the output or only compares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Write every file whose bytes differ and delete what the output no longer holds.
    Write,
    /// Change nothing; report what a write would change.
    Check,
}

/// What [`ensure_tree`] did (in [`Mode::Check`]: what a write would do).
#[derive(Debug, Default)]
pub struct TreeReport {
    /// Files whose bytes changed (or that were new); in check mode, those that differ.
    pub written: Vec<PathBuf>,
    /// Files already identical.
    pub unchanged: Vec<PathBuf>,
    /// Temporary files ([`TEMP_PREFIX`]) an interrupted run left behind, removed.
    pub removed: Vec<PathBuf>,
    /// Sealed files of targets no longer listed, deleted (each proven to be the generator's: a
    /// seal that verifies, in the target folder its seal names).
    pub deleted: Vec<PathBuf>,
    /// Files a complete output does not produce that regen cannot prove it wrote, kept, each
    /// with the reason.
    pub kept: Vec<(PathBuf, String)>,
    /// Check mode: a short diff of each file that differs, and each file a write would delete.
    pub differences: Vec<Difference>,
}

/// One difference between the output tree and what the generator produces.
#[derive(Debug)]
pub struct Difference {
    /// The file, relative to the generated crate's root.
    pub path: PathBuf,
    /// A short unified diff (committed → regenerated), or why there is none.
    pub diff: String,
}

/// The one function that writes ([`Mode::Write`]) or checks ([`Mode::Check`]) the generated
/// crate under `root` against `files` (its files, relative to `root`). `complete` says that
/// `files` is everything the target list produces, which is what lets a write delete the sealed
/// files of targets no longer listed (and a check report them).
///
/// For the whole run it holds a lock on `root` (exclusive to write, shared to check; a second
/// run waits, saying so once). It refuses a symbolic link on the way to any file it reads or
/// writes, and anything but a regular file where a file should be, before changing anything.
/// A write removes the temporary files ([`TEMP_PREFIX`]) a killed run left in the folders it
/// writes (no live run can own them while the lock is held), stages every changed file beside
/// its target (flushed to disk) before the first rename, renames them into place, deletes, and
/// flushes the folders it changed.
pub fn ensure_tree(
    root: &Path,
    files: &[GeneratedFile],
    complete: bool,
    mode: Mode,
) -> Result<TreeReport, EmitError> {
    let _lock = TreeLock::take(root, mode)?;
    let mut report = TreeReport::default();
    let mut changed = Vec::new();
    for f in files {
        no_links(root, &f.path)?;
        let old = read_regular(&root.join(&f.path))?;
        if old.as_deref() == Some(f.contents.as_bytes()) {
            report.unchanged.push(f.path.clone());
        } else {
            report.written.push(f.path.clone());
            changed.push((f, old));
        }
    }
    let delete = if complete {
        unlisted(root, files, &mut report.kept)?
    } else {
        Vec::new()
    };
    if mode == Mode::Check {
        for (f, old) in &changed {
            report.differences.push(Difference {
                path: f.path.clone(),
                diff: match old {
                    Some(old) => short_diff(&String::from_utf8_lossy(old), &f.contents, 40),
                    None => "missing: not committed".to_owned(),
                },
            });
        }
        report
            .differences
            .extend(delete.iter().map(|path| Difference {
                path: path.clone(),
                diff: "sealed, but its target is not listed in generator/targets.txt any more: regen deletes it".to_owned(),
            }));
        report.deleted = delete;
        return Ok(report);
    }
    write_changes(root, files, &changed, &delete, &mut report)?;
    Ok(report)
}

/// The writing half of [`ensure_tree`].
fn write_changes(
    root: &Path,
    files: &[GeneratedFile],
    changed: &[(&GeneratedFile, Option<Vec<u8>>)],
    delete: &[PathBuf],
    report: &mut TreeReport,
) -> Result<(), EmitError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EmitError::Write { path, source }
    };
    // The folders written to, and those of the files deleted (so an emptied one can go).
    let dirs: BTreeSet<PathBuf> = files
        .iter()
        .map(|f| f.path.as_path())
        .chain(delete.iter().map(PathBuf::as_path))
        .map(|rel| root.join(rel).parent().unwrap_or(root).to_path_buf())
        .collect();
    for dir in &dirs {
        for stale in remove_temporaries(dir)? {
            let rel = stale.strip_prefix(root).unwrap_or(&stale).to_path_buf();
            report.removed.push(rel);
        }
    }
    let mut staged = Vec::new();
    for (f, _) in changed {
        let path = root.join(&f.path);
        let dir = path.parent().unwrap_or(root);
        std::fs::create_dir_all(dir).map_err(write_err(dir))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(dir)
            .map_err(write_err(dir))?;
        std::io::Write::write_all(&mut tmp, f.contents.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(write_err(tmp.path()))?;
        staged.push((tmp, path));
    }
    let mut synced = BTreeSet::new();
    for (tmp, path) in staged {
        tmp.persist(&path).map_err(|e| EmitError::Write {
            path: path.clone(),
            source: e.error,
        })?;
        synced.insert(path.parent().unwrap_or(root).to_path_buf());
    }
    for rel in delete {
        let path = root.join(rel);
        std::fs::remove_file(&path).map_err(write_err(&path))?;
        let dir = path.parent().unwrap_or(root);
        // Only an emptied folder goes; `remove_dir` refuses one that still holds anything.
        if std::fs::remove_dir(dir).is_ok() {
            synced.remove(dir);
            synced.insert(dir.parent().unwrap_or(root).to_path_buf());
        } else {
            synced.insert(dir.to_path_buf());
        }
        report.deleted.push(rel.clone());
    }
    synced.retain(|dir| dir.is_dir());
    for dir in synced {
        sync_dir(&dir).map_err(|source| EmitError::Write { path: dir, source })?;
    }
    Ok(())
}

/// The files under `root`'s bindings folder that a complete output does not produce and that
/// regen can prove it wrote: regular files directly in a target folder (`ctk_<major>_<minor>`)
/// whose seal verifies and names that folder's target, that is, the files of targets no longer
/// listed (or no longer produced). Everything else the output does not produce that looks
/// generated or sits in such a folder goes to `kept` with the reason. Temporary files are never
/// listed. A symbolic link anywhere in the bindings tree is an error. Relative to `root`, sorted.
fn unlisted(
    root: &Path,
    files: &[GeneratedFile],
    kept: &mut Vec<(PathBuf, String)>,
) -> Result<Vec<PathBuf>, EmitError> {
    let produced: BTreeSet<&Path> = files.iter().map(|f| f.path.as_path()).collect();
    let mut out = Vec::new();
    let bindings = root.join(BINDINGS_DIR);
    let mut pending = match std::fs::symlink_metadata(&bindings) {
        Ok(m) if m.file_type().is_symlink() => return Err(EmitError::Link { path: bindings }),
        Ok(m) if m.is_dir() => vec![(bindings, None)],
        _ => return Ok(out),
    };
    while let Some((dir, target)) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| EmitError::Write {
            path: dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let name = entry.file_name();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                return Err(EmitError::Link { path });
            }
            if name.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes()) {
                continue;
            }
            if meta.is_dir() {
                // Only the bindings folder's own subfolders can be target folders.
                let ctk = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("ctk_"))
                    .and_then(|n| n.replacen('_', ".", 1).parse::<Ctk>().ok())
                    .filter(|c| target.is_none() && c.module() == name.to_string_lossy());
                if ctk.is_some() {
                    pending.push((path, ctk));
                }
                continue;
            }
            if produced.contains(rel.as_path()) {
                continue;
            }
            match proven_generated(&path, &meta, target) {
                Ok(()) => out.push(rel),
                Err(Some(reason)) => kept.push((rel, reason)),
                Err(None) => {}
            }
        }
    }
    out.sort();
    kept.sort();
    Ok(out)
}

/// `Ok` when the file at `path` (in the target folder of `target`, if any) is one the generator
/// wrote: a regular file whose seal verifies and names that folder's target. Otherwise why it is
/// kept (`None`: a file that neither looks generated nor sits in a target folder, not worth a
/// line).
fn proven_generated(
    path: &Path,
    meta: &std::fs::Metadata,
    target: Option<Ctk>,
) -> Result<(), Option<String>> {
    if !meta.is_file() {
        return Err(Some(format!("{}, not a regular file", kind_of(meta))));
    }
    let bytes = read_regular(path)
        .ok()
        .flatten()
        .ok_or_else(|| Some("unreadable".to_owned()))?;
    let marker = hostcb_seal::marker().as_bytes();
    let looks_sealed = bytes.windows(marker.len()).any(|w| w == marker);
    let Some(ctk) = target else {
        return Err(looks_sealed.then(|| {
            "it quotes the seal marker, but lies outside any target folder, so it is not one of the generator's files".to_owned()
        }));
    };
    match hostcb_seal::check_contents(&bytes) {
        Ok(info) if info.ctk == ctk.to_string() => Ok(()),
        Ok(info) => Err(Some(format!(
            "its seal names ctk={}, not this folder's {ctk}",
            info.ctk
        ))),
        Err(problem) if looks_sealed => Err(Some(format!(
            "it quotes the seal marker, but its seal does not verify ({})",
            problem.to_string().split(';').next().unwrap_or_default()
        ))),
        Err(_) => Err(Some(
            "it is not a sealed file, so regen cannot prove it wrote it".to_owned(),
        )),
    }
}

/// Fails if `rel` passes through, or is, a symbolic link under `root`.
fn no_links(root: &Path, rel: &Path) -> Result<(), EmitError> {
    let mut path = root.to_path_buf();
    for part in rel.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(EmitError::Link { path }),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// The bytes of the regular file at `path`, or `None` where nothing is. A link, FIFO, socket,
/// device or folder is an error, and is never opened for reading its contents (a FIFO would
/// block the reader): the path is looked at without following it, and opened without following
/// a link and without blocking, then checked again.
pub fn read_regular(path: &Path) -> Result<Option<Vec<u8>>, EmitError> {
    use std::io::Read;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(EmitError::Write {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let refuse = |meta: &std::fs::Metadata| {
        if meta.file_type().is_symlink() {
            Err(EmitError::Link {
                path: path.to_path_buf(),
            })
        } else if !meta.is_file() {
            Err(EmitError::NotRegular {
                path: path.to_path_buf(),
                kind: kind_of(meta),
            })
        } else {
            Ok(())
        }
    };
    refuse(&meta)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW,
    );
    let io = |source| EmitError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = options.open(path).map_err(io)?;
    refuse(&file.metadata().map_err(io)?)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(bytes))
}

/// What a file system entry is, for messages (`a FIFO`, `a folder`, ...).
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    crate::inputs::file_kind(meta.file_type())
}

/// A lock on the output folder for one [`ensure_tree`] run (`flock` on the folder itself, so it
/// leaves no file behind and is released when the process dies).
struct TreeLock(#[allow(dead_code, reason = "held for its lock")] std::fs::File);

impl TreeLock {
    fn take(root: &Path, mode: Mode) -> Result<Self, EmitError> {
        let io = |source| EmitError::Write {
            path: root.to_path_buf(),
            source,
        };
        let dir = std::fs::File::open(root).map_err(io)?;
        if !dir.metadata().map_err(io)?.is_dir() {
            return Err(EmitError::NotRegular {
                path: root.to_path_buf(),
                kind: "not a folder",
            });
        }
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let kind = match mode {
                Mode::Write => libc::LOCK_EX,
                Mode::Check => libc::LOCK_SH,
            };
            let lock = |flags| {
                // SAFETY: flock on a descriptor this function owns.
                if unsafe { libc::flock(dir.as_raw_fd(), flags) } == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            if let Err(e) = lock(kind | libc::LOCK_NB) {
                if e.kind() != std::io::ErrorKind::WouldBlock {
                    return Err(io(e));
                }
                eprintln!(
                    "waiting for another regen or check of {} to finish",
                    root.display()
                );
                lock(kind).map_err(io)?;
            }
        }
        #[cfg(not(unix))]
        let _ = mode;
        Ok(TreeLock(dir))
    }
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

/// A unified diff of `old` → `new`, cut to `max_lines` lines.
fn short_diff(old: &str, new: &str, max_lines: usize) -> String {
    let diff = similar::TextDiff::from_lines(old, new)
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
    diff
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
    fn a_write_removes_stale_temporaries_in_the_folders_it_writes() {
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

        let summary = ensure_tree(root, std::slice::from_ref(&driver), false, Mode::Write).unwrap();
        assert_eq!(summary.written, std::slice::from_ref(&driver.path));
        assert_eq!(
            summary.removed,
            [target_dir(Ctk::V12_9).join(".regen-AbC123")]
        );
        assert_eq!(names_in(&dir), ["driver.rs"]);
        assert_eq!(names_in(&other), [".regen-keep"]);

        // Also when nothing needs writing.
        std::fs::write(dir.join(".regen-XyZ789"), half).unwrap();
        let summary = ensure_tree(root, std::slice::from_ref(&driver), false, Mode::Write).unwrap();
        assert!(summary.written.is_empty());
        assert_eq!(names_in(&dir), ["driver.rs"]);
    }

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

    #[test]
    fn headers_record_the_generator_and_its_sources() {
        let file = seal_file(
            Ctk::V12_9,
            target_dir(Ctk::V12_9).join("driver.rs"),
            "//",
            "pub fn d() {}\n".to_owned(),
        )
        .unwrap();
        let first = file.contents.lines().next().unwrap();
        assert!(
            first.contains(&format!(
                "by hostcb-generator {GENERATOR_VERSION} (sources sha256 {}) from the CTK 12.9 headers",
                crate::BUILT_FROM_SOURCES
            )),
            "{first}"
        );
        let recorded = RecordedGenerator::of_file(file.contents.as_bytes()).unwrap();
        assert_eq!(recorded, RecordedGenerator::this());
        assert_eq!(recorded.to_string(), GENERATOR);
        // A file of a generator that recorded no source hash, and of another generator.
        let old = format!(
            "// {GENERATED} by hostcb-generator 0.1.0 from the CTK 12.9 headers. Do not edit.\n"
        );
        let old = RecordedGenerator::of_file(old.as_bytes()).unwrap();
        assert_eq!(old.sources, None);
        assert_ne!(old, RecordedGenerator::this());
        let other = file
            .contents
            .replacen(crate::BUILT_FROM_SOURCES, &"0".repeat(64), 1);
        let other = RecordedGenerator::of_file(other.as_bytes()).unwrap();
        assert_eq!(other.sources.as_deref(), Some("0".repeat(64).as_str()));
        assert!(RecordedGenerator::of_file(b"pub fn d() {}\n").is_none());

        let provenance = provenance_file(Ctk::V12_9, &[], &[&file], &"ab".repeat(32)).unwrap();
        // The summary's digest is read back from the sealed file, and only from a sealed file
        // of this target.
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join(&provenance.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &provenance.contents).unwrap();
        assert_eq!(
            sealed_summary_sha256(root.path(), Ctk::V12_9),
            Some("ab".repeat(32))
        );
        let edited = provenance
            .contents
            .replace(&"ab".repeat(32), &"cd".repeat(32));
        std::fs::write(&path, &edited).unwrap();
        assert_eq!(sealed_summary_sha256(root.path(), Ctk::V12_9), None);
        std::fs::write(&path, &provenance.contents).unwrap();
        let other = root.path().join(target_dir(Ctk::V13_0)).join(PROVENANCE);
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::copy(&path, other).unwrap();
        assert_eq!(sealed_summary_sha256(root.path(), Ctk::V13_0), None);
        assert!(
            provenance.contents.contains(&format!(
                "\n[generator]\nname = \"hostcb-generator\"\nversion = \"{GENERATOR_VERSION}\"\nsources_sha256 = \"{}\"\n",
                crate::BUILT_FROM_SOURCES
            )),
            "{}",
            provenance.contents
        );
    }

    #[test]
    fn manifest_targets_are_the_generated_features() {
        let dir = tempfile::tempdir().unwrap();
        let write = |features: &str| {
            std::fs::write(
                dir.path().join(MANIFEST),
                format!(
                    "[package]\nname = \"cuda-hostcb\"\n\n[features]\nctk-9-9 = []\n{FEATURES_BEGIN}\n{features}{FEATURES_END}\n"
                ),
            )
            .unwrap();
        };
        write(
            "ctk-13-0 = []\nctk-12-9 = []\nall-targets = [\"ctk-12-9\", \"ctk-13-0\"]\nnewest-target = [\"ctk-13-0\"]\n",
        );
        assert_eq!(
            manifest_targets(dir.path()).unwrap(),
            [Ctk::V12_9, Ctk::V13_0]
        );
        // What regen writes there for that list is the same region.
        let written = manifest(dir.path(), &[Ctk::V12_9, Ctk::V13_0]).unwrap();
        std::fs::write(dir.path().join(MANIFEST), &written.contents).unwrap();
        assert_eq!(
            manifest_targets(dir.path()).unwrap(),
            [Ctk::V12_9, Ctk::V13_0]
        );
        write("all-targets = []\n");
        let err = manifest_targets(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("declares no `ctk-<major>-<minor>` feature"),
            "{err}"
        );
        std::fs::write(dir.path().join(MANIFEST), "[package]\n").unwrap();
        let err = manifest_targets(dir.path()).unwrap_err().to_string();
        assert!(err.contains("needs one line"), "{err}");
    }

    #[test]
    fn verify_skips_temp_files_with_the_prefix_a_write_uses() {
        assert_eq!(
            hostcb_seal::VerifyOptions::default().temp_prefix.as_deref(),
            Some(TEMP_PREFIX)
        );
    }
}
