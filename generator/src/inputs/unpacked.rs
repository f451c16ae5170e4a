//! The cached unpacked tree of a wheel part, [`Tree`]: made once, checked on every use, never
//! changed in place.
//!
//! Unpacking writes the kept part of a checked [`Wheel`] into a temporary folder beside the tree
//! (each file's size and SHA-256 checked against the wheel's RECORD as it is written), writes a
//! manifest of every file there (path, size, SHA-256), checks the whole temporary tree as a use
//! would, and only then renames it into place. A tree that fails its check is replaced the same
//! way, by swapping the complete new tree with the old one in one atomic rename
//! (`renameat2(RENAME_EXCHANGE)` on Linux), so a process reading the tree's paths meanwhile reads
//! the old files or the new ones, never a missing or half-written one.
//!
//! Several processes share one cache (two CI jobs, two checkouts under one
//! `$HOSTCB_INPUTS_CACHE`). Checking needs no lock. Making or replacing a tree takes an exclusive
//! lock on `<cache>/locks/<key>.lock` and checks the tree again under it, so only one process unpacks a tree,
//! and a problem is reported only when it is still there under the lock: a tree that another
//! process was swapping while this one checked it is never reported.
//!
//! What a passing check guarantees: the tree holds exactly the files the wheel has under the kept
//! part (none added, none missing, no links, FIFOs or other special files), and each has the size
//! and SHA-256 of the wheel's RECORD line for it (the wheel is hash-checked against
//! `generator/inputs.lock` and its RECORD against its entries, see `wheel.rs`), so the expectation
//! comes from the lock, never from the cache: editing a header and the manifest alike is caught.
//! What it cannot guarantee: a file rewritten after the check, while bindgen runs (the check
//! narrows that window to one run, it does not close it); and anything outside the unpacked trees,
//! such as gcc's include folder that clang also reads.
//!
//! What it saves, measured on 2 cores (`target/debug/xtask regen --ctk 12.9`, `regen --ctk all`
//! and `check`, median of 5 runs each): 1.88, 3.70 and 3.70 s with the trees cached, against
//! 2.12, 4.23 and 4.10 s (x1.13, x1.14, x1.11) when every tree is unpacked per run into a
//! temporary folder (libclang once per process; 2.41, 4.35 and 4.20 s with `<cache>/unpacked/`
//! emptied before each run), most of it libclang's 61 MB: the headers alone unpacked per run
//! cost 1.90, 4.00 and 3.98 s.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::InputError;
use super::files::{UNPACK_PREFIX, kind, lock_file, open_regular, report, sha256_reader};
use super::wheel::{FileRecord, Wheel};

/// The manifest's name, at the root of an unpacked tree. No wheel entry lies there: every kept
/// part is a folder or file below a package folder.
pub(crate) const MANIFEST: &str = ".hostcb-manifest";

/// The first line of a manifest; the format's version is part of the unpack key too.
const HEADER: &str = "# hostcb unpacked files, format 1: <sha256> <size> <path>";

/// A checked unpacked tree: its root and its files as the wheel states them.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    root: PathBuf,
    files: Vec<FileRecord>,
}

/// Why a tree fails its check.
enum Problem {
    /// There is no tree.
    Absent,
    /// The tree is there but wrong: the first file that is, and how.
    Wrong(String),
}

impl Problem {
    fn describe(self) -> String {
        match self {
            Problem::Absent => "it is missing".to_owned(),
            Problem::Wrong(what) => what,
        }
    }
}

impl Tree {
    /// The tree of `keep` of `wheel` at `root` (`<cache>/unpacked/<key>`): checked, or made, or
    /// made again (with one warning line naming what was wrong), as the module documentation says.
    pub(crate) fn ensure(wheel: &mut Wheel, keep: &str, root: PathBuf) -> Result<Tree, InputError> {
        let files = wheel.stated(keep)?;
        if check(&root, &files)?.is_ok() {
            return Ok(Tree { root, files });
        }
        let parent = root.parent().unwrap_or(Path::new(".")).to_owned();
        // `<cache>/locks/<key>.lock`: beside the cache's folders, not among the trees.
        let key = root.file_name().unwrap_or_default().to_string_lossy();
        let lock_path = parent
            .parent()
            .unwrap_or(Path::new("."))
            .join("locks")
            .join(format!("{key}.lock"));
        let lock = lock_file(&lock_path)?;
        lock.lock().map_err(InputError::io(&lock_path))?;
        // Another process may have made or repaired it while this one waited.
        let problem = match check(&root, &files)? {
            Ok(()) => return Ok(Tree { root, files }),
            Err(problem) => problem,
        };
        let file_name = wheel
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match &problem {
            Problem::Absent => report(&format!(
                "unpacking {keep} of {file_name} into {}",
                root.display()
            )),
            Problem::Wrong(what) => report(&format!(
                "warning: {}: {what}; unpacking it again from {file_name}, whose SHA-256 matches the lock",
                root.display()
            )),
        }
        fs::create_dir_all(&parent).map_err(InputError::io(&parent))?;
        let tmp = tempfile::Builder::new()
            .prefix(UNPACK_PREFIX)
            .tempdir_in(&parent)
            .map_err(InputError::io(&parent))?;
        let new = tmp.path().join("tree");
        fs::create_dir(&new).map_err(InputError::io(&new))?;
        let written = wheel.unpack(keep, &new)?;
        let manifest = new.join(MANIFEST);
        fs::write(&manifest, render(&written)).map_err(InputError::io(&manifest))?;
        if let Err(problem) = check(&new, &files)? {
            return Err(InputError::Unpacked {
                root: new,
                wheel: file_name,
                problem: problem.describe(),
            });
        }
        match problem {
            Problem::Absent => fs::rename(&new, &root).map_err(InputError::io(&root))?,
            Problem::Wrong(_) => exchange(&new, &root)?,
        }
        // The old tree, if any, now lies in `tmp` and goes with it.
        drop(tmp);
        match check(&root, &files)? {
            Ok(()) => Ok(Tree { root, files }),
            Err(problem) => Err(InputError::Unpacked {
                root,
                wheel: file_name,
                problem: problem.describe(),
            }),
        }
    }

    /// The tree's root folder.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The tree's files, sorted by path, as checked.
    pub(crate) fn files(&self) -> &[FileRecord] {
        &self.files
    }
}

/// Puts the complete tree `new` in the place of `old` in one step: on Linux the two are swapped
/// atomically (`renameat2` with `RENAME_EXCHANGE`), so `old`'s path always names a whole tree and
/// the old one ends at `new`'s path. Elsewhere, or where the file system cannot swap, the old tree
/// is moved aside first, which leaves a moment with no tree (a reader then waits for the lock and
/// finds the new one).
fn exchange(new: &Path, old: &Path) -> Result<(), InputError> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        if let (Some(a), Some(b)) = (c(new), c(old)) {
            // SAFETY: two valid NUL-terminated paths; the call only renames.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            if rc == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
                return Err(InputError::from_io(old.to_owned(), e));
            }
        }
    }
    let aside = new.with_extension("old");
    fs::rename(old, &aside).map_err(InputError::io(old))?;
    fs::rename(new, old).map_err(InputError::io(old))?;
    fs::rename(&aside, new).map_err(InputError::io(new))
}

/// The manifest's text for `records` (sorted by path).
fn render(records: &[FileRecord]) -> String {
    let mut out = format!("{HEADER}\n");
    for r in records {
        out.push_str(&format!("{} {} {}\n", r.sha256, r.size, r.path));
    }
    out
}

fn parse(text: &str) -> Option<Vec<FileRecord>> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    lines
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let sha256 = parts.next()?;
            let size = parts.next()?.parse().ok()?;
            let path = parts.next()?;
            (sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
                FileRecord {
                    path: path.to_owned(),
                    size,
                    sha256: sha256.to_owned(),
                }
            })
        })
        .collect()
}

/// Every file under `root` (relative paths with `/`, sorted), or the first entry that is neither a
/// folder nor a regular file.
fn walk(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<Result<(), String>, InputError> {
    let dir = root.join(rel);
    let mut entries = match fs::read_dir(&dir).and_then(|e| e.collect::<io::Result<Vec<_>>>()) {
        Ok(entries) => entries,
        // Swapped away while this walk ran: a problem of this tree, not a failure of the run.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Err(format!("{rel} vanished while it was checked")));
        }
        Err(e) => return Err(InputError::from_io(dir, e)),
    };
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let file_type = entry.file_type().map_err(InputError::io(entry.path()))?;
        if file_type.is_dir() {
            if let Err(problem) = walk(root, &path, out)? {
                return Ok(Err(problem));
            }
        } else if file_type.is_file() {
            out.push(path);
        } else {
            return Ok(Err(format!(
                "{path} is {}, which no wheel entry unpacks to",
                kind(file_type)
            )));
        }
    }
    Ok(Ok(()))
}

/// Checks the tree at `root` against `expected` (what the wheel states), as the module
/// documentation says. `Err` only when something cannot be read for another reason than the
/// tree being wrong or absent.
fn check(root: &Path, expected: &[FileRecord]) -> Result<Result<(), Problem>, InputError> {
    let wrong = |what: String| Ok(Err(Problem::Wrong(what)));
    match fs::symlink_metadata(root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(Problem::Absent)),
        Err(e) => return Err(InputError::from_io(root.to_owned(), e)),
        Ok(meta) if !meta.is_dir() => {
            return wrong(format!("it is {}, not a folder", kind(meta.file_type())));
        }
        Ok(_) => {}
    }
    let manifest_path = root.join(MANIFEST);
    let manifest = match fs::symlink_metadata(&manifest_path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return wrong(format!("{MANIFEST} is missing"));
        }
        Err(e) => return wrong(format!("{MANIFEST} cannot be examined ({e})")),
        Ok(meta) if !meta.is_file() => {
            return wrong(format!("{MANIFEST} is {}", kind(meta.file_type())));
        }
        Ok(_) => match fs::read(&manifest_path).map(String::from_utf8) {
            Ok(Ok(text)) => parse(&text),
            _ => None,
        },
    };
    let Some(manifest) = manifest else {
        return wrong(format!("{MANIFEST} is unreadable"));
    };
    if manifest != expected {
        let differs = expected
            .iter()
            .zip(&manifest)
            .find(|(e, m)| e != m)
            .map(|(e, _)| e.path.clone())
            .or_else(|| expected.get(manifest.len()).map(|e| e.path.clone()))
            .or_else(|| manifest.get(expected.len()).map(|m| m.path.clone()))
            .unwrap_or_default();
        return wrong(format!("{MANIFEST} disagrees with the wheel on {differs}"));
    }

    let mut files = Vec::new();
    if let Err(problem) = walk(root, "", &mut files)? {
        return wrong(problem);
    }
    let listed: BTreeSet<&str> = expected.iter().map(|r| r.path.as_str()).collect();
    if let Some(extra) = files
        .iter()
        .find(|f| f.as_str() != MANIFEST && !listed.contains(f.as_str()))
    {
        return wrong(format!("{extra} is not in the wheel"));
    }
    if let Some(missing) = expected.iter().find(|r| !files.contains(&r.path)) {
        return wrong(format!("{} is missing", missing.path));
    }
    for r in expected {
        let path = root.join(&r.path);
        let file = match open_regular(&path, "delete the unpacked folder and retry") {
            Ok(file) => file,
            Err(InputError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return wrong(format!("{} vanished while it was checked", r.path));
            }
            Err(e) => return Err(e),
        };
        let size = file.metadata().map_err(InputError::io(&path))?.len();
        if size != r.size {
            return wrong(format!(
                "{} has {size} bytes where the wheel's entry has {}",
                r.path, r.size
            ));
        }
        let (sha256, _) = sha256_reader(file).map_err(InputError::io(&path))?;
        if sha256 != r.sha256 {
            return wrong(format!(
                "{} differs from the wheel's entry (sha256 {sha256}, the wheel's {})",
                r.path, r.sha256
            ));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let records = vec![FileRecord {
            path: "a b/c.h".into(),
            size: 3,
            sha256: "ab".repeat(32),
        }];
        assert_eq!(parse(&render(&records)), Some(records));
        assert_eq!(parse("junk\n"), None);
        assert_eq!(parse(&format!("{HEADER}\nxx 3 a\n")), None);
    }
}
