//! Reading a file that must be a regular file: the one policy of this crate's walks and of the
//! generator's reads of its inputs and outputs. A file is opened only to be read, with
//! `O_NONBLOCK` on Unix (so a FIFO never blocks the open), and its type is checked on the open
//! file (so a file swapped for another kind after a look at its path is caught too). Whether a
//! symbolic link is followed is the caller's choice ([`Links`]): a checked tree refuses one, a
//! named input may be one.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

/// Whether a symbolic link at the path read is followed or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// Read the file the link names (it must be a regular file).
    Follow,
    /// A link is not read: it is reported as `a symbolic link`.
    Refuse,
}

/// What a file of type `file_type` is, for messages, if it is not a regular file: `a symbolic
/// link`, `a folder`, `a FIFO`, `a socket`, `a block device`, `a character device` or `a special
/// file`.
pub fn irregular(file_type: fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_symlink() {
        return Some("a symbolic link");
    }
    if file_type.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
    }
    Some("a special file")
}

/// `path` opened for reading if it is a regular file, else what it is ([`irregular`]). The
/// error is the system's (a missing file is [`io::ErrorKind::NotFound`]).
pub fn open_regular(path: &Path, links: Links) -> io::Result<Result<fs::File, &'static str>> {
    if links == Links::Refuse
        && let Some(kind) = irregular(fs::symlink_metadata(path)?.file_type())
    {
        return Ok(Err(kind));
    }
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let no_follow = match links {
            Links::Follow => 0,
            Links::Refuse => libc::O_NOFOLLOW,
        };
        options.custom_flags(libc::O_NONBLOCK | no_follow);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        // A link swapped in after the look above.
        #[cfg(unix)]
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) && links == Links::Refuse => {
            return Ok(Err("a symbolic link"));
        }
        Err(error) => return Err(error),
    };
    match irregular(file.metadata()?.file_type()) {
        Some(kind) => Ok(Err(kind)),
        None => Ok(Ok(file)),
    }
}

/// The bytes of `path` if it is a regular file, else what it is (see [`open_regular`]).
pub fn read_regular(path: &Path, links: Links) -> io::Result<Result<Vec<u8>, &'static str>> {
    let mut file = match open_regular(path, links)? {
        Ok(file) => file,
        Err(kind) => return Ok(Err(kind)),
    };
    let mut bytes = Vec::with_capacity(file.metadata().map_or(0, |m| m.len() as usize));
    file.read_to_end(&mut bytes)?;
    Ok(Ok(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "bytes").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let read = |path: &Path, links| read_regular(path, links).unwrap();
        assert_eq!(read(&file, Links::Refuse), Ok(b"bytes".to_vec()));
        assert_eq!(read(&link, Links::Follow), Ok(b"bytes".to_vec()));
        assert_eq!(read(&link, Links::Refuse), Err("a symbolic link"));
        // Never blocks on a FIFO, followed or not.
        assert_eq!(read(&fifo, Links::Refuse), Err("a FIFO"));
        assert_eq!(read(&fifo, Links::Follow), Err("a FIFO"));
        assert_eq!(read(dir.path(), Links::Follow), Err("a folder"));
        let missing = read_regular(&dir.path().join("none"), Links::Follow).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}
