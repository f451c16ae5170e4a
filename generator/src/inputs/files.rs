//! Files of the inputs: opening them safely (only regular files are opened, a link is followed
//! to one, and the open itself never blocks, so a FIFO where a header should be is an error
//! instead of a hang), hashing them, progress lines, and the input cache's locks and temporaries.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
/// The prefix of a tree being unpacked, or of an old tree being deleted, in `<cache>/unpacked/`.
pub(crate) const UNPACK_PREFIX: &str = ".unpack-";

/// The temporaries a process makes in the cache, by folder; a killed process leaves them behind.
const TEMPORARIES: [(&str, &[&str]); 2] = [
    ("wheels", &[DOWNLOAD_PREFIX, PIN_PREFIX]),
    // `.stale-` was the old-tree folder of earlier versions.
    ("unpacked", &[UNPACK_PREFIX, ".stale-"]),
];

/// Opens (creating it if needed) the lock file at `path`.
pub(crate) fn lock_file(path: &Path) -> Result<fs::File, InputError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(InputError::io(dir))?;
    }
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(InputError::io(path))
}

/// Joins the input cache at `cache` for the rest of this process: a shared lock on
/// `<cache>/.lock`, held until the process ends, marks it as in use. The first process to join a
/// cache no one else uses (its exclusive lock succeeds) first deletes the temporaries that killed
/// processes left (`.download-*` and `.pin-*` in `wheels/`, `.unpack-*` in `unpacked/`); while any other process holds the cache, temporaries are
/// left alone, since they may be that process's work in progress. Cheap after the first call.
pub fn join_cache(cache: &Path) -> Result<(), InputError> {
    static JOINED: Mutex<Vec<(PathBuf, fs::File)>> = Mutex::new(Vec::new());
    let mut joined = JOINED.lock().unwrap_or_else(|e| e.into_inner());
    if joined.iter().any(|(c, _)| c == cache) {
        return Ok(());
    }
    let path = cache.join(".lock");
    let file = match lock_file(&path) {
        Ok(file) => file,
        // A cache this process may only read: nothing here can write to it, so there is nothing
        // to hold apart or sweep.
        Err(InputError::Io { source, .. })
            if matches!(
                source.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {
            sweep(cache);
            // Downgrade to shared: other processes may join now.
            file.lock_shared().map_err(InputError::io(&path))?;
        }
        Err(fs::TryLockError::WouldBlock) => file.lock_shared().map_err(InputError::io(&path))?,
        Err(fs::TryLockError::Error(e)) => return Err(InputError::from_io(path, e)),
    }
    joined.push((cache.to_owned(), file));
    Ok(())
}

/// Deletes the temporaries of killed processes (best effort: one that cannot be deleted is left
/// for a later run).
fn sweep(cache: &Path) {
    for (dir, prefixes) in TEMPORARIES {
        let Ok(entries) = fs::read_dir(cache.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if prefixes
                .iter()
                .any(|p| name.to_string_lossy().starts_with(p))
            {
                let path = entry.path();
                let _ = match entry.file_type() {
                    Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
                    _ => fs::remove_file(&path),
                };
            }
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
