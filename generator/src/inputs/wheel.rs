//! Wheels: fetching one with pip, checking its SHA-256 against the lock, and unpacking part of it
//! safely (no entry may land outside the target folder; a failed unpack leaves nothing behind),
//! with a manifest of what was written (see `unpacked.rs`).

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::files::{hex, sha256_file};
use super::unpacked::{self, FileRecord, is_kept};
use super::{InputError, LockEntry, report};

/// The download step: puts the wheel of `name==version` into a folder.
pub trait Fetch {
    /// Downloads the wheel of `spec` (`name==version`) into the existing folder `dir`.
    fn fetch(&self, spec: &str, dir: &Path) -> Result<(), InputError>;
}

/// Downloads with `<python> -m pip download --no-deps --only-binary=:all: --platform <platform>`,
/// so the same wheel is chosen on any machine.
#[derive(Clone, Debug)]
pub struct Pip {
    /// The Python interpreter (`python3`).
    pub python: OsString,
    /// The wheel platform tag asked for (`manylinux2014_x86_64`).
    pub platform: String,
}

impl Default for Pip {
    fn default() -> Self {
        Pip {
            python: "python3".into(),
            platform: "manylinux2014_x86_64".to_owned(),
        }
    }
}

impl Fetch for Pip {
    fn fetch(&self, spec: &str, dir: &Path) -> Result<(), InputError> {
        let failed = |detail: String| InputError::Download {
            spec: spec.to_owned(),
            detail,
        };
        let output = Command::new(&self.python)
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .args(["--platform", &self.platform])
            .args(["--disable-pip-version-check", "--no-input"])
            .args(["--progress-bar", "off", "-d"])
            .arg(dir)
            .arg(spec)
            .output()
            .map_err(|e| {
                failed(format!(
                    "could not run {}: {e}",
                    Path::new(&self.python).display()
                ))
            })?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("pip exited with {}", output.status));
        Err(failed(last))
    }
}

/// Checks that the wheel at `path` has the SHA-256 that `entry` locks.
pub fn verify_wheel(path: &Path, entry: &LockEntry) -> Result<(), InputError> {
    let actual = sha256_file(path)?;
    if actual == entry.sha256 {
        Ok(())
    } else {
        Err(InputError::HashMismatch {
            file: entry.file.clone(),
            actual,
            expected: entry.sha256.clone(),
            path: path.to_owned(),
        })
    }
}

/// The wheel of `entry` in `wheels`: the cached copy if its hash matches, else a fresh download
/// (which must then match).
pub(crate) fn ensure(
    entry: &LockEntry,
    fetch: &dyn Fetch,
    wheels: &Path,
) -> Result<PathBuf, InputError> {
    let path = wheels.join(&entry.file);
    if path.is_file() && sha256_file(&path)? == entry.sha256 {
        return Ok(path);
    }
    fs::create_dir_all(wheels).map_err(InputError::io(wheels))?;
    let tmp = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(wheels)
        .map_err(InputError::io(wheels))?;
    report(&format!(
        "downloading {} ({}) into {}",
        entry.spec(),
        entry.file,
        wheels.display()
    ));
    fetch.fetch(&entry.spec(), tmp.path())?;
    let got = tmp.path().join(&entry.file);
    if !got.is_file() {
        let mut names: Vec<String> = fs::read_dir(tmp.path())
            .map_err(InputError::io(tmp.path()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        return Err(InputError::UnexpectedFile {
            spec: entry.spec(),
            got: if names.is_empty() {
                "nothing".to_owned()
            } else {
                names.join(", ")
            },
            expected: entry.file.clone(),
        });
    }
    let size = fs::metadata(&got).map_err(InputError::io(&got))?.len();
    fs::rename(&got, &path).map_err(InputError::io(&path))?;
    verify_wheel(&path, entry)?;
    report(&format!(
        "downloaded {}: {}, cached as {}",
        entry.spec(),
        human_size(size),
        path.display()
    ));
    Ok(path)
}

/// `24.6 MB (24567890 bytes)`.
fn human_size(bytes: u64) -> String {
    format!("{:.1} MB ({bytes} bytes)", bytes as f64 / 1e6)
}

/// A writer that hashes what it passes on.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Whether an entry name is a plain relative path (no root, drive, `..` or NUL).
fn is_safe(name: &str) -> bool {
    !name.contains('\0')
        && !name.starts_with('\\')
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Unpacks the entries of `wheel` at or under `keep` into the folder `dest` (created if needed),
/// keeping their paths. Every entry name is checked first, kept or not: if any is absolute or has
/// a `..` component (or a kept entry is a link), nothing is written.
pub fn unpack_wheel(wheel: &Path, keep: &str, dest: &Path) -> Result<(), InputError> {
    unpack_recorded(wheel, keep, dest).map(drop)
}

/// [`unpack_wheel`], returning each written file's path, size and SHA-256, sorted by path.
fn unpack_recorded(wheel: &Path, keep: &str, dest: &Path) -> Result<Vec<FileRecord>, InputError> {
    let zip_err = |source| InputError::Zip {
        wheel: wheel.to_owned(),
        source,
    };
    let file = fs::File::open(wheel).map_err(InputError::io(wheel))?;
    let mut archive = zip::ZipArchive::new(io::BufReader::new(file)).map_err(zip_err)?;

    let mut kept = Vec::new();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(zip_err)?;
        let name = entry.name().map_err(zip_err)?.into_owned();
        let unsafe_entry = || InputError::UnsafeEntry {
            wheel: wheel.to_owned(),
            entry: name.clone(),
        };
        if !is_safe(&name) {
            return Err(unsafe_entry());
        }
        if is_kept(name.trim_end_matches('/'), keep) {
            if entry.is_symlink() {
                return Err(unsafe_entry());
            }
            kept.push(i);
        }
    }
    if kept.is_empty() {
        return Err(InputError::NothingToUnpack {
            wheel: wheel.to_owned(),
            prefix: keep.to_owned(),
        });
    }

    fs::create_dir_all(dest).map_err(InputError::io(dest))?;
    let mut records = Vec::new();
    for i in kept {
        let mut entry = archive.by_index(i).map_err(zip_err)?;
        let name = entry.name().map_err(zip_err)?.into_owned();
        let out = dest.join(&name);
        if entry.is_dir() {
            fs::create_dir_all(&out).map_err(InputError::io(&out))?;
            continue;
        }
        if let Some(parent) = out.parent() {
            fs::create_dir_all(parent).map_err(InputError::io(parent))?;
        }
        let mut file = Hashing {
            inner: fs::File::create(&out).map_err(InputError::io(&out))?,
            hasher: Sha256::new(),
            len: 0,
        };
        io::copy(&mut entry, &mut file).map_err(InputError::io(&out))?;
        records.push(FileRecord {
            path: name,
            size: file.len,
            sha256: hex(&file.hasher.finalize()),
        });
        #[cfg(unix)]
        if let Some(mode) = entry.unix_mode() {
            use std::os::unix::fs::PermissionsExt;
            // Owner read/write always, so the cache can be read and deleted.
            let perms = fs::Permissions::from_mode((mode & 0o755) | 0o600);
            fs::set_permissions(&out, perms).map_err(InputError::io(&out))?;
        }
    }
    records.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(records)
}

/// Unpacks `keep` of `wheel` into a temporary folder next to `root`, writes the manifest there
/// (after checking each file against what the wheel states), then renames the folder to `root`,
/// so `root` either holds the whole part and its manifest or does not exist.
pub(crate) fn unpack_into_place(wheel: &Path, keep: &str, root: &Path) -> Result<(), InputError> {
    let parent = root.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(InputError::io(parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".unpack-")
        .tempdir_in(parent)
        .map_err(InputError::io(parent))?;
    let written = unpack_recorded(wheel, keep, tmp.path())?;
    let stated = unpacked::from_wheel(wheel, keep)?;
    if let Some((w, s)) = written.iter().zip(&stated).find(|(w, s)| w != s) {
        return Err(InputError::InconsistentWheel {
            wheel: wheel.to_owned(),
            entry: w.path.clone(),
            detail: format!(
                "its bytes are {} bytes with sha256 {}, its RECORD says {} bytes with sha256 {}",
                w.size, w.sha256, s.size, s.sha256
            ),
        });
    }
    let manifest = tmp.path().join(unpacked::MANIFEST);
    fs::write(&manifest, unpacked::render(&written)).map_err(InputError::io(&manifest))?;
    match fs::rename(tmp.path(), root) {
        Ok(()) => {
            let _ = tmp.keep();
            Ok(())
        }
        // Another process unpacked the same wheel first; its tree is complete.
        Err(_) if root.is_dir() => Ok(()),
        Err(e) => Err(InputError::Io {
            path: root.to_owned(),
            source: e,
        }),
    }
}

/// Replaces the tree at `root`, which failed its check, with a fresh unpack of `keep` of `wheel`:
/// the old tree is moved aside, the new one renamed into place, and the old one deleted.
pub(crate) fn replace_unpacked(wheel: &Path, keep: &str, root: &Path) -> Result<(), InputError> {
    let parent = root.parent().unwrap_or(Path::new("."));
    let stale = tempfile::Builder::new()
        .prefix(".stale-")
        .tempdir_in(parent)
        .map_err(InputError::io(parent))?;
    match fs::rename(root, stale.path().join("old")) {
        Ok(()) => {}
        // Another process moved it first.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(InputError::Io {
                path: root.to_owned(),
                source: e,
            });
        }
    }
    unpack_into_place(wheel, keep, root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert!(is_safe("nvidia/cu13/include/cuda.h"));
        assert!(is_safe("./a/b"));
        for bad in [
            "../evil",
            "a/../../evil",
            "a/..",
            "/etc/passwd",
            "\\evil",
            "a\0b",
        ] {
            assert!(!is_safe(bad), "{bad:?} passed");
        }
        assert!(is_kept("a/b/c.h", "a/b"));
        assert!(is_kept("a/b", "a/b"));
        assert!(!is_kept("a/bc/d.h", "a/b"));
        assert!(!is_kept("x/a/b/c.h", "a/b"));
    }

    #[test]
    fn sha256_of_empty_input() {
        assert_eq!(
            super::super::files::sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
