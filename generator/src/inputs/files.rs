//! Files of the inputs: opening them safely (only regular files are opened, a link is followed
//! to one, and the open itself never blocks, so a FIFO where a header should be is an error
//! instead of a hang), hashing them, progress lines, and the input cache's temporary folders.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::InputError;

/// Prints one progress line of the inputs (a download, an unpack, a repaired cache) to stderr.
pub(crate) fn report(line: &str) {
    eprintln!("{line}");
}

/// The prefix of a download's temporary folder in `<cache>/wheels/`.
pub(crate) const DOWNLOAD_PREFIX: &str = ".download-";
/// The prefix of `cargo xtask pin`'s temporary folder in `<cache>/wheels/`.
pub const PIN_PREFIX: &str = ".pin-";
/// The prefix of the temporary folder in `<cache>/libclang/` that the library is written into.
pub(crate) const UNPACK_PREFIX: &str = ".unpack-";

/// A temporary folder of this process in the input cache (a download, pin's scratch, libclang
/// being written), beside the place its result is renamed into: named `<prefix><random>` and
/// locked (an exclusive `flock` on the folder itself) for as long as it lives, then deleted.
///
/// Processes share the cache without a lock of their own: each writes into a folder of its own
/// and renames the finished file into place. A process that is killed leaves its folder behind,
/// unlocked, since the system releases a dead process's locks: making a temporary deletes every
/// folder of its prefix beside it that it can lock, and only those, so the work of a process
/// still running is never touched.
#[derive(Debug)]
pub struct Temporary {
    dir: tempfile::TempDir,
    _lock: fs::File,
}

impl Temporary {
    /// A new temporary folder `<parent>/<prefix><random>` (`parent` is made if needed), after
    /// deleting the folders of `prefix` that killed processes left in `parent`.
    pub fn new(parent: &Path, prefix: &str) -> Result<Temporary, InputError> {
        fs::create_dir_all(parent).map_err(InputError::io(parent))?;
        sweep(parent, prefix);
        loop {
            let dir = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir_in(parent)
                .map_err(InputError::io(parent))?;
            // Another process's sweep may lock and delete the folder between its making and its
            // locking here: then it is gone before it is opened, or the lock is on a deleted
            // folder, and a new one is made.
            let lock = match fs::File::open(dir.path()) {
                Ok(lock) => lock,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(InputError::from_io(dir.path().to_owned(), e)),
            };
            lock.lock().map_err(InputError::io(dir.path()))?;
            if fs::metadata(dir.path()).is_ok() {
                return Ok(Temporary { dir, _lock: lock });
            }
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Deletes what killed processes left in `parent` under `prefix`: every entry of that prefix
/// that can be locked at once (best effort: one that cannot be deleted is left for a later run).
fn sweep(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        // Without blocking on a FIFO of that name.
        let mut options = fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NONBLOCK);
        }
        let Ok(file) = options.open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = match entry.file_type() {
                Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
                _ => fs::remove_file(&path),
            };
        }
    }
}

/// What a file that is not a regular file is, for messages (`a FIFO`, `a folder`, ...).
pub(crate) fn kind(file_type: fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

/// Opens `path` for reading if it is a regular file (or a link to one). On Unix the open uses
/// `O_NONBLOCK`, which returns at once on a FIFO, and the type is checked on the open file, so a
/// file swapped for a FIFO after a check is caught too. `hint` ends the message of a file that is
/// not regular.
pub(crate) fn open_regular(path: &Path, hint: &str) -> Result<fs::File, InputError> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(InputError::io(path))?;
    let file_type = file.metadata().map_err(InputError::io(path))?.file_type();
    if !file_type.is_file() {
        return Err(InputError::NotRegular {
            path: path.to_owned(),
            kind: kind(file_type),
            hint: hint.to_owned(),
        });
    }
    Ok(file)
}

/// The bytes of the regular file at `path` (see [`open_regular`]).
pub(crate) fn read_regular(path: &Path, hint: &str) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    open_regular(path, hint)?
        .read_to_end(&mut bytes)
        .map_err(InputError::io(path))?;
    Ok(bytes)
}

/// SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 and length of everything `reader` yields.
pub(crate) fn sha256_reader(mut reader: impl Read) -> io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((hex(&hasher.finalize()), len))
}

/// SHA-256 of the regular file at `path` (a link is followed), lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, InputError> {
    let file = open_regular(path, "replace it with the real file")?;
    sha256_reader(file)
        .map(|(digest, _)| digest)
        .map_err(InputError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_sweeps_only_what_no_process_holds() {
        let parent = tempfile::tempdir().unwrap();
        let held = Temporary::new(parent.path(), ".t-").unwrap();
        fs::write(held.path().join("part"), "in progress").unwrap();
        // What a killed process leaves: a folder and a file of the prefix, locked by no one.
        let left = parent.path().join(".t-killed");
        fs::create_dir_all(left.join("deep")).unwrap();
        fs::write(left.join("deep/x.whl"), "partial").unwrap();
        fs::write(parent.path().join(".t-file"), "partial").unwrap();
        fs::write(parent.path().join("kept.whl"), "a result").unwrap();
        let second = Temporary::new(parent.path(), ".t-").unwrap();
        assert!(!left.exists() && !parent.path().join(".t-file").exists());
        assert!(
            held.path().join("part").is_file(),
            "a held temporary was swept"
        );
        assert!(parent.path().join("kept.whl").is_file());
        let (a, b) = (held.path().to_owned(), second.path().to_owned());
        assert_ne!(a, b);
        drop((held, second));
        assert!(!a.exists() && !b.exists(), "a temporary outlived its value");
        let names: Vec<_> = fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["kept.whl"]);
    }

    /// Processes that make temporaries in one folder at once sweep each other's newest folders
    /// before those are locked; each still gets one of its own, and none fails (flock locks are
    /// per open file, so threads meet here as processes do).
    #[test]
    fn temporaries_made_at_once_never_fail_each_other() {
        let parent = tempfile::tempdir().unwrap();
        let failures: Vec<String> = std::thread::scope(|s| {
            let makers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..300)
                            .filter_map(|_| {
                                let made = Temporary::new(parent.path(), ".t-")
                                    .map_err(|e| e.to_string())
                                    .and_then(|t| {
                                        fs::write(t.path().join("part"), "x")
                                            .map_err(|e| e.to_string())
                                    });
                                made.err()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            makers.into_iter().flat_map(|m| m.join().unwrap()).collect()
        });
        assert!(failures.is_empty(), "{failures:?}");
    }
}
