//! Writing and checking the output tree ([`ensure_tree`]): under a lock on the output folder,
//! only files whose bytes change, never through a symbolic link and never opening anything but a
//! regular file; it deletes only sealed files it can prove it wrote.
//!
//! What a write that fails or is killed leaves: each file is replaced by renaming a whole copy,
//! staged and flushed beside it, so every file is at any moment wholly old or wholly new. Every
//! changed file is staged before the first rename, so a failure before then leaves every file as
//! it was, temporaries aside (an earlier killed run's are removed first; its own staged copies
//! are removed, or, if it is killed, left: [`TEMP_PREFIX`]`*`). The renames are one per file, not
//! one for the tree: a run killed or failing among them ([`EmitError::Midway`]) leaves the files
//! renamed so far new and the others old. Each file's seal still verifies (`cargo xtask verify`
//! notes the temporaries), `cargo xtask check` names the files still old, and the next regen
//! removes the temporaries and writes those files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hostcb_seal::file::{self, Links};

use super::{BINDINGS_DIR, EmitError, GeneratedFile};
use crate::Ctk;

/// The name prefix of the temporary files [`ensure_tree`] stages beside their targets. A killed
/// run can leave them behind; the next run removes them, and `cargo xtask verify` skips them.
pub const TEMP_PREFIX: &str = ".regen-";

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
/// its target (flushed to disk) before the first rename, renames them into place one by one,
/// deletes, and flushes the folders it changed (see the module's documentation for what a
/// failure or a kill leaves).
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
        staged.push((tmp.into_temp_path(), path));
    }
    // From the first rename on, a failure leaves some files new.
    let midway = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EmitError::Midway { path, source }
    };
    let mut synced = BTreeSet::new();
    for (tmp, path) in staged {
        std::fs::rename(&tmp, &path).map_err(midway(&path))?;
        let _renamed = tmp.keep();
        synced.insert(path.parent().unwrap_or(root).to_path_buf());
    }
    for rel in delete {
        let path = root.join(rel);
        std::fs::remove_file(&path).map_err(midway(&path))?;
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
        sync_dir(&dir).map_err(midway(&dir))?;
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
        let entries = std::fs::read_dir(&dir).map_err(write_err(&dir))?;
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
        let kind = crate::inputs::file_kind(meta.file_type());
        return Err(Some(format!("{kind}, not a regular file")));
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
/// device or folder is an error, and is never read (a FIFO would block the reader): see
/// [`hostcb_seal::file::read_regular`], with links refused.
pub fn read_regular(path: &Path) -> Result<Option<Vec<u8>>, EmitError> {
    match file::read_regular(path, Links::Refuse) {
        Ok(Ok(bytes)) => Ok(Some(bytes)),
        Ok(Err("a symbolic link")) => Err(EmitError::Link {
            path: path.to_path_buf(),
        }),
        Ok(Err(kind)) => Err(EmitError::NotRegular {
            path: path.to_path_buf(),
            kind,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(write_err(path)(source)),
    }
}

/// For `map_err`: an I/O failure on `path` before any file was replaced.
fn write_err(path: &Path) -> impl Fn(std::io::Error) -> EmitError + use<> {
    let path = path.to_path_buf();
    move |source| EmitError::Write {
        path: path.clone(),
        source,
    }
}

/// A lock on the output folder for one [`ensure_tree`] run (`flock` on the folder itself, so it
/// leaves no file behind and is released when the process dies).
struct TreeLock(#[allow(dead_code, reason = "held for its lock")] std::fs::File);

impl TreeLock {
    fn take(root: &Path, mode: Mode) -> Result<Self, EmitError> {
        let io = write_err(root);
        let dir = std::fs::File::open(root).map_err(&io)?;
        if !dir.metadata().map_err(&io)?.is_dir() {
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
    use crate::emit::target_dir;

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
        let driver = GeneratedFile {
            path: target_dir(Ctk::V12_9).join("driver.rs"),
            contents: "// A generated driver.rs.\npub fn d() {}\n".to_owned(),
        };
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
    fn verify_skips_temp_files_with_the_prefix_a_write_uses() {
        assert_eq!(
            hostcb_seal::VerifyOptions::default().temp_prefix.as_deref(),
            Some(TEMP_PREFIX)
        );
    }
}
