//! Opening input files safely: only regular files are opened (a link is followed to one), and the
//! open itself never blocks, so a FIFO where a header should be is an error instead of a hang.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::InputError;

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
