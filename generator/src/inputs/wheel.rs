//! Wheels: fetching one with pip, and reading one. A [`Wheel`] is opened once: the SHA-256 is
//! taken of the open file and the zip is read from that same file, so the bytes checked against
//! the lock are the bytes unpacked. Opening checks what a wheel promises about itself before
//! anything of it is trusted: unique, plain entry names; exactly one `*.dist-info/RECORD` that
//! lists every file once, with the size the zip states; no links; and a cap on the decompressed
//! size. Unpacking checks each written file's size and SHA-256 against its RECORD line, and its
//! CRC-32 against the zip's.
//!
//! The zip is read with rawzip, which parses the archive's structure and leaves the rest to its
//! caller: entries are inflated here (flate2), and the checks on names, doubles, links and sizes
//! are this module's.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use rawzip::{CompressionMethod, Crc32, FileReader, ZipArchive, ZipArchiveEntryWayfinder};
use sha2::{Digest, Sha256};

use super::error::InputError;
use super::files::{
    DOWNLOAD_PREFIX, Temporary, hex, open_regular, report, sha256_file, sha256_reader,
};
use super::lock::LockEntry;

/// The most a wheel may decompress to, all entries together: 1 GiB. The largest pinned wheel,
/// `nvidia-cuda-nvcc-cu12` 12.9 (40 MB compressed), holds 98 MB; a wheel beyond the cap is refused
/// before anything is decompressed, and no entry is read beyond the size its RECORD states.
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// The most a RECORD may hold (the pinned wheels' are under 20 kB).
const MAX_RECORD_BYTES: u64 = 16 << 20;

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

impl Pip {
    /// Downloads the wheel that `spec` (a requirement, e.g. `name==13.0.*`) selects into `dir`,
    /// returning what pip printed on stderr (its warnings).
    pub fn download(&self, spec: &str, dir: &Path) -> Result<String, InputError> {
        let output = Command::new(&self.python)
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .args(["--platform", &self.platform])
            .args(["--disable-pip-version-check", "--no-input"])
            .args(["--progress-bar", "off", "-d"])
            .arg(dir)
            .arg(spec)
            .output()
            .map_err(|e| InputError::Download {
                spec: spec.to_owned(),
                detail: format!("could not run {}: {e}", Path::new(&self.python).display()),
            })?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            return Ok(stderr);
        }
        Err(pip_failure(spec, dir, &stderr, &output.status.to_string()))
    }
}

impl Fetch for Pip {
    fn fetch(&self, spec: &str, dir: &Path) -> Result<(), InputError> {
        self.download(spec, dir).map(drop)
    }
}

/// What pip prints when it cannot reach the index (its retries, urllib3's connection errors).
const UNREACHABLE: [&str; 7] = [
    "Failed to establish a new connection",
    "NewConnectionError",
    "Could not fetch URL",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "connection broken by",
    "ConnectTimeoutError",
];

/// The error of a failed `pip download`, from its stderr: a full disk and an unreachable index
/// are named as such (pip ends both with "No matching distribution found"), anything else by
/// pip's last line.
fn pip_failure(spec: &str, dir: &Path, stderr: &str, status: &str) -> InputError {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(line) = lines
        .iter()
        .find(|l| l.contains("No space left on device") || l.contains("[Errno 28]"))
    {
        return InputError::DiskFull {
            path: dir.to_owned(),
            detail: format!("pip: {line}"),
        };
    }
    if let Some(line) = lines
        .iter()
        .find(|l| UNREACHABLE.iter().any(|m| l.contains(m)))
    {
        // urllib3's line is long: keep the reason (`[Errno 111] Connection refused`).
        let detail = line
            .split_once("Failed to establish a new connection: ")
            .map(|(_, rest)| rest.split(['\'', ')']).next().unwrap_or(rest).to_owned())
            .unwrap_or_else(|| line.chars().take(200).collect());
        return InputError::Unreachable {
            spec: spec.to_owned(),
            detail,
        };
    }
    let mut detail = lines
        .last()
        .map(|l| (*l).to_owned())
        .unwrap_or_else(|| format!("pip exited with {status}"));
    // pip names the versions it saw on the line before ("Could not find a version that
    // satisfies the requirement x (from versions: 1.0, 1.1)").
    if let Some(seen) = lines
        .iter()
        .find_map(|l| l.split_once("(from versions: ").map(|(_, rest)| rest))
        && !detail.contains("(from versions: ")
    {
        detail = format!("{detail} (from versions: {seen}");
    }
    InputError::Download {
        spec: spec.to_owned(),
        detail,
    }
}

/// One file of a wheel: its path inside the wheel (with `/`), size and SHA-256 (lower-case hex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileRecord {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// Whether the entry `name` lies at or under `keep` (a folder or a single file of the wheel).
pub(crate) fn is_kept(name: &str, keep: &str) -> bool {
    name.strip_prefix(keep)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether an entry name is a plain relative path (no root, drive, `..` or NUL).
fn is_safe(name: &str) -> bool {
    !name.contains('\0')
        && !name.starts_with('\\')
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Whether an entry is a folder: its name ends in a slash (or a backslash, which some Windows
/// tools write). A folder holds nothing to check or unpack.
fn is_dir(name: &str) -> bool {
    name.ends_with(['/', '\\'])
}

/// The Unix mode an entry records, if any: the upper half of its external attributes where it
/// was made on Unix, or on another system that set that half; for one made on MS-DOS (which
/// records only a read-only bit), a plain file's. None where the attributes are zero.
fn unix_mode(made_by: rawzip::VersionMadeBy, attributes: u32) -> Option<u32> {
    /// The set-user-ID, set-group-ID and sticky bits, never kept.
    const SPECIAL: u32 = 0o7000;
    let mode = attributes >> 16;
    let system = made_by.creator_system();
    if attributes == 0 {
        None
    } else if system == rawzip::CreatorSystem::FAT {
        Some(0o100_644)
    } else if system == rawzip::CreatorSystem::UNIX || mode != 0 {
        Some(mode & !SPECIAL)
    } else {
        None
    }
}

/// Whether a Unix mode has the file type bits of a symbolic link (or a type that contains them).
fn is_link(mode: Option<u32>) -> bool {
    const S_IFLNK: u32 = 0o120_000;
    mode.is_some_and(|m| m & S_IFLNK == S_IFLNK)
}

/// What is wrong with the zip's end records that rawzip reads past, if anything:
///
/// - a zip that says it is split over several disks (in the end of central directory record, or
///   where there is one in the Zip64 locator before it): no wheel is, and readers differ on one
///   (some refuse it, others read it as one file);
/// - a central directory that lies before where the end record says: rawzip then reads the
///   entries at the offsets they state, where Python's zipfile (pip's reader) moves them back by
///   the difference, so the two would read different bytes. (One that lies after it, behind data
///   put before the zip, is read alike by both.)
fn end_record_problem(archive: &ZipArchive<FileReader>) -> io::Result<Option<&'static str>> {
    const SPLIT: &str = "it says it is split over several disks";
    let read = |at: u64, buf: &mut [u8]| {
        rawzip::RangeReader::new(archive.get_ref(), at..at + buf.len() as u64).read_exact(buf)
    };
    let eocd = archive.eocd_offset();
    let mut end = [0u8; 22];
    read(eocd, &mut end)?;
    let mut locator = [0u8; 20];
    if let Some(at) = eocd.checked_sub(20)
        && read(at, &mut locator).is_ok()
        && locator[..4] == 0x0706_4b50u32.to_le_bytes()
    {
        let disks = u32::from_le_bytes([locator[16], locator[17], locator[18], locator[19]]);
        return Ok((disks > 1).then_some(SPLIT));
    }
    if end[4..8] != [0; 4] || end[8..10] != end[10..12] {
        return Ok(Some(SPLIT));
    }
    let stated = u32::from_le_bytes([end[16], end[17], end[18], end[19]]);
    if archive.directory_offset() < u64::from(stated) {
        return Ok(Some(
            "its central directory lies before where its end record says",
        ));
    }
    Ok(None)
}

/// Where one file of a wheel lies and how it is stored, as the zip's central directory says.
#[derive(Clone, Copy, Debug)]
struct Stored {
    at: ZipArchiveEntryWayfinder,
    method: CompressionMethod,
    encrypted: bool,
    crc32: u32,
    size: u64,
    mode: Option<u32>,
}

/// A wheel file, opened once and checked as the module documentation says.
pub struct Wheel {
    path: PathBuf,
    sha256: String,
    archive: ZipArchive<FileReader>,
    /// Where each file entry lies, by name (folders left out).
    stored: BTreeMap<String, Stored>,
    /// Every file the wheel holds (RECORD lines, checked against the zip), by path.
    files: BTreeMap<String, FileRecord>,
}

impl std::fmt::Debug for Wheel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wheel")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl Wheel {
    /// Opens and checks the wheel at `path` (a regular file).
    pub fn open(path: &Path) -> Result<Wheel, InputError> {
        Wheel::read(path, None)
    }

    /// Opens the wheel at `path` if its SHA-256 is the one `entry` locks ([`InputError::HashMismatch`]
    /// otherwise, before its content is read), and checks it.
    pub fn open_locked(path: &Path, entry: &LockEntry) -> Result<Wheel, InputError> {
        Wheel::read(path, Some(entry))
    }

    fn read(path: &Path, locked: Option<&LockEntry>) -> Result<Wheel, InputError> {
        let mut file = open_regular(path, "replace it with the real wheel")?;
        let (sha256, _) = sha256_reader(&mut file).map_err(InputError::io(path))?;
        if let Some(entry) = locked
            && sha256 != entry.sha256
        {
            return Err(InputError::HashMismatch {
                file: entry.file.clone(),
                actual: sha256,
                expected: entry.sha256.clone(),
                path: path.to_owned(),
            });
        }
        let zip_err = |detail: String| InputError::Zip {
            wheel: path.to_owned(),
            detail,
        };
        let untrusted = |problem: String| InputError::UntrustedWheel {
            wheel: path.to_owned(),
            problem,
        };
        // Large enough for any central directory record, so no entry is refused for its length.
        let mut buffer = vec![0u8; rawzip::MAX_CENTRAL_DIRECTORY_RECORD_SIZE];
        // rawzip reads at offsets (pread) and finds the end itself: no rewind after the hash.
        let archive =
            ZipArchive::from_file(file, &mut buffer).map_err(|e| zip_err(e.to_string()))?;
        if let Some(problem) = end_record_problem(&archive).map_err(|e| zip_err(e.to_string()))? {
            return Err(zip_err(problem.to_owned()));
        }
        // The whole central directory first: its names are checked for doubles before anything
        // else of it is judged.
        let mut central = Vec::new();
        let mut entries = archive.entries(&mut buffer);
        while let Some(entry) = entries.next_entry().map_err(|e| zip_err(e.to_string()))? {
            let stored = Stored {
                at: entry.wayfinder(),
                method: entry.compression_method(),
                encrypted: entry.flags().is_encrypted(),
                crc32: entry.crc32(),
                size: entry.uncompressed_size_hint(),
                mode: unix_mode(entry.version_made_by(), entry.external_attributes()),
            };
            central.push((entry.file_path().as_ref().to_vec(), stored));
        }
        // The end record's count against the records read: a directory cut short, or one that
        // runs on, is a broken zip.
        if central.len() as u64 != archive.entries_hint() {
            return Err(zip_err(format!(
                "its central directory holds {} entries, its end record says {}",
                central.len(),
                archive.entries_hint()
            )));
        }
        let mut names = BTreeSet::new();
        if !central
            .iter()
            .all(|(name, _)| names.insert(name.as_slice()))
        {
            return Err(untrusted(
                "it holds two zip entries of one name (a reader would see only one of them)"
                    .to_owned(),
            ));
        }
        let mut stored = BTreeMap::new();
        let mut records = Vec::new();
        let mut total = 0u64;
        for (raw, entry) in central {
            // Wheels name their entries in UTF-8; a name in another encoding would be read
            // differently by different tools.
            let name = String::from_utf8(raw).map_err(|e| {
                untrusted(format!(
                    "it holds an entry whose name is not UTF-8 ({:?})",
                    String::from_utf8_lossy(e.as_bytes())
                ))
            })?;
            if !is_safe(&name) || is_link(entry.mode) {
                return Err(InputError::UnsafeEntry {
                    wheel: path.to_owned(),
                    entry: name,
                });
            }
            total = total.saturating_add(entry.size);
            if is_dir(&name) {
                continue;
            }
            if let Some(dist_info) = name.strip_suffix(".dist-info/RECORD")
                && !dist_info.contains('/')
            {
                records.push(name.clone());
            }
            stored.insert(name, entry);
        }
        if total > MAX_UNPACKED_BYTES {
            return Err(untrusted(format!(
                "it decompresses to {total} bytes, more than the cap of {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        let record_name = match &records[..] {
            [one] => one.clone(),
            [] => return Err(untrusted("it has no *.dist-info/RECORD".to_owned())),
            _ => {
                return Err(untrusted(format!(
                    "it has {} *.dist-info/RECORD files, not one",
                    records.len()
                )));
            }
        };
        let record_entry = stored[&record_name];
        if record_entry.size > MAX_RECORD_BYTES {
            return Err(untrusted(format!(
                "its RECORD has {} bytes, more than the cap of {MAX_RECORD_BYTES} bytes",
                record_entry.size
            )));
        }
        let mut record = Hashing::new(Vec::new());
        io::copy(
            &mut open_entry(path, &archive, &record_name, &record_entry)?
                .take(record_entry.size + 1),
            &mut record,
        )
        .map_err(|e| untrusted(format!("its RECORD is unreadable ({e})")))?;
        if record.len != record_entry.size {
            return Err(untrusted(format!(
                "its RECORD is unreadable (it holds {}, its zip entry says {} bytes)",
                length(record.len, record_entry.size),
                record_entry.size
            )));
        }
        check_crc(path, &record_name, &record_entry, &record.crc)?;
        let record = String::from_utf8(record.inner)
            .map_err(|e| untrusted(format!("its RECORD is unreadable ({e})")))?;
        let files = parse_record(&record, &record_name).map_err(untrusted)?;
        for (name, Stored { size, .. }) in &stored {
            let unlisted_ok = *name == record_name
                || name.ends_with(".dist-info/RECORD.jws")
                || name.ends_with(".dist-info/RECORD.p7s");
            match files.get(name) {
                None if unlisted_ok => {}
                None => return Err(untrusted(format!("its RECORD does not list {name}"))),
                Some(r) if r.size != *size => {
                    return Err(untrusted(format!(
                        "its RECORD says {name} has {} bytes, the zip entry says {size}",
                        r.size
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(name) = files.keys().find(|n| !stored.contains_key(*n)) {
            return Err(untrusted(format!(
                "its RECORD lists {name}, which the wheel does not hold"
            )));
        }
        Ok(Wheel {
            path: path.to_owned(),
            sha256,
            archive,
            stored,
            files,
        })
    }

    /// Where the wheel lies.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SHA-256 of its bytes, lower-case hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// What the wheel's RECORD states about its files at or under `keep`, sorted by path; an
    /// error if there are none.
    pub(crate) fn stated(&self, keep: &str) -> Result<Vec<FileRecord>, InputError> {
        let kept: Vec<FileRecord> = self
            .files
            .values()
            .filter(|r| is_kept(&r.path, keep))
            .cloned()
            .collect();
        if kept.is_empty() {
            return Err(InputError::NothingToUnpack {
                wheel: self.path.clone(),
                prefix: keep.to_owned(),
            });
        }
        Ok(kept)
    }

    /// Writes the files at or under `keep` into the existing, empty folder `dest` (keeping their
    /// paths) and returns them, sorted by path. Each file must have the size and SHA-256 its
    /// RECORD line states, and the CRC-32 its zip entry states; no entry is read beyond that size.
    pub(crate) fn unpack(&self, keep: &str, dest: &Path) -> Result<Vec<FileRecord>, InputError> {
        let stated = self.stated(keep)?;
        for want in &stated {
            let (mut entry, stored) = self.entry(&want.path)?;
            let out = dest.join(&want.path);
            if let Some(parent) = out.parent() {
                fs::create_dir_all(parent).map_err(InputError::io(parent))?;
            }
            let mut file = Hashing::new(fs::File::create_new(&out).map_err(InputError::io(&out))?);
            // One byte past the stated size is enough to tell that it lies.
            io::copy(&mut (&mut entry).take(want.size + 1), &mut file)
                .map_err(InputError::io(&out))?;
            let got = hex(&file.sha256.finalize());
            if file.len != want.size || got != want.sha256 {
                return Err(InputError::InconsistentWheel {
                    wheel: self.path.clone(),
                    entry: want.path.clone(),
                    detail: format!(
                        "its bytes are {} with sha256 {got}, its RECORD says {} bytes with sha256 {}",
                        length(file.len, want.size),
                        want.size,
                        want.sha256
                    ),
                });
            }
            check_crc(&self.path, &want.path, stored, &file.crc)?;
            #[cfg(unix)]
            if let Some(mode) = stored.mode {
                use std::os::unix::fs::PermissionsExt;
                // Owner read/write always, so the cache can be read and deleted.
                let perms = fs::Permissions::from_mode((mode & 0o755) | 0o600);
                fs::set_permissions(&out, perms).map_err(InputError::io(&out))?;
            }
        }
        Ok(stated)
    }

    /// The bytes of the one file `path` of the wheel, which must have the size and SHA-256 its
    /// RECORD line states and the CRC-32 its zip entry states (no more than that size is read).
    pub(crate) fn read_file(&self, path: &str) -> Result<Vec<u8>, InputError> {
        let want = self
            .files
            .get(path)
            .ok_or_else(|| InputError::NothingToUnpack {
                wheel: self.path.clone(),
                prefix: path.to_owned(),
            })?;
        let (mut entry, stored) = self.entry(&want.path)?;
        let mut bytes = Hashing::new(Vec::new());
        io::copy(&mut (&mut entry).take(want.size + 1), &mut bytes)
            .map_err(InputError::io(&self.path))?;
        let got = hex(&bytes.sha256.finalize());
        if bytes.len != want.size || got != want.sha256 {
            return Err(InputError::InconsistentWheel {
                wheel: self.path.clone(),
                entry: want.path.clone(),
                detail: format!(
                    "its bytes have sha256 {got}, its RECORD says {} bytes with sha256 {}",
                    want.size, want.sha256
                ),
            });
        }
        check_crc(&self.path, &want.path, stored, &bytes.crc)?;
        Ok(bytes.inner)
    }

    /// A reader of the bytes of the file `name` of the wheel, and where the zip says it lies.
    fn entry(&self, name: &str) -> Result<(Box<dyn Read + '_>, &Stored), InputError> {
        let stored = self.stored.get(name).ok_or_else(|| InputError::Zip {
            wheel: self.path.clone(),
            detail: format!("it has no entry {name}"),
        })?;
        Ok((open_entry(&self.path, &self.archive, name, stored)?, stored))
    }
}

/// A reader of the bytes of the entry `name` of the wheel `wheel`, which `stored` locates in
/// `archive`: as they are, or inflated. An entry encrypted, or compressed by another method than
/// these two (which are all that wheels use), cannot be read.
fn open_entry<'a>(
    wheel: &Path,
    archive: &'a ZipArchive<FileReader>,
    name: &str,
    stored: &Stored,
) -> Result<Box<dyn Read + 'a>, InputError> {
    let unreadable = |detail: String| InputError::Zip {
        wheel: wheel.to_owned(),
        detail,
    };
    if stored.encrypted {
        return Err(unreadable(format!("its entry {name} is encrypted")));
    }
    let raw = archive
        .get_entry(stored.at)
        .map_err(|e| unreadable(format!("its entry {name}: {e}")))?
        .reader();
    match stored.method {
        CompressionMethod::STORE => Ok(Box::new(raw)),
        CompressionMethod::DEFLATE => Ok(Box::new(flate2::read::DeflateDecoder::new(raw))),
        other => Err(unreadable(format!(
            "its entry {name} is compressed with method {other}, not stored or deflated"
        ))),
    }
}

/// Checks the CRC-32 of the bytes read of the entry `name` against the one its zip entry states.
fn check_crc(wheel: &Path, name: &str, stored: &Stored, crc: &Crc32) -> Result<(), InputError> {
    if crc.checksum() == stored.crc32 {
        return Ok(());
    }
    Err(InputError::Zip {
        wheel: wheel.to_owned(),
        detail: format!(
            "its entry {name} has CRC-32 {:08x}, its zip entry states {:08x}",
            crc.checksum(),
            stored.crc32
        ),
    })
}

/// `len` bytes as read of an entry stated to hold `size`, of which one past `size` at most was
/// read: `12 bytes`, or `more than 12 bytes`.
fn length(len: u64, size: u64) -> String {
    if len > size {
        format!("more than {size} bytes")
    } else {
        format!("{len} bytes")
    }
}

/// The lines of a RECORD (`path,sha256=<unpadded url-safe base64>,size`; the path may be quoted),
/// by path. Every line must have a SHA-256 and a size, except those of RECORD itself and its
/// signatures; a path listed twice is an error.
fn parse_record(record: &str, record_name: &str) -> Result<BTreeMap<String, FileRecord>, String> {
    let mut out = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for line in record.lines().filter(|l| !l.trim().is_empty()) {
        // The hash and size hold no comma; the path may.
        let mut parts = line.rsplitn(3, ',');
        let (Some(size), Some(hash), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("its RECORD has a malformed line '{line}'"));
        };
        let path = match path.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            Some(quoted) => quoted.replace("\"\"", "\""),
            None => path.to_owned(),
        };
        if !seen.insert(path.clone()) {
            return Err(format!("its RECORD lists {path} twice"));
        }
        let unhashed = path == record_name
            || path.ends_with(".dist-info/RECORD.jws")
            || path.ends_with(".dist-info/RECORD.p7s");
        if unhashed && hash.is_empty() {
            continue;
        }
        let digest = hash
            .strip_prefix("sha256=")
            .and_then(base64_url)
            .filter(|d| d.len() == 32)
            .ok_or_else(|| format!("its RECORD gives {path} no SHA-256"))?;
        let size = size
            .parse()
            .map_err(|_| format!("its RECORD gives {path} no size"))?;
        out.insert(
            path.clone(),
            FileRecord {
                path,
                size,
                sha256: hex(&digest),
            },
        );
    }
    Ok(out)
}

/// Decodes the unpadded URL-safe base64 of a RECORD hash. (Eight lines; a base64 crate would be
/// the generator's only use of one.)
fn base64_url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    Some(out)
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

/// Unpacks the entries of `wheel` at or under `keep` into the folder `dest` (created if needed),
/// keeping their paths, after checking the wheel (see [`Wheel::open`]): if any entry is unsafe or
/// the wheel breaks its own RECORD, nothing is written.
pub fn unpack_wheel(wheel: &Path, keep: &str, dest: &Path) -> Result<(), InputError> {
    let wheel = Wheel::open(wheel)?;
    wheel.stated(keep)?;
    fs::create_dir_all(dest).map_err(InputError::io(dest))?;
    wheel.unpack(keep, dest).map(drop)
}

/// The wheel of `entry` in `wheels`, opened and checked: the cached copy if its hash matches, else
/// a fresh download into a [`Temporary`] beside it, which must match before it is renamed into the
/// cache (so the cache never holds bytes that fail the lock under the locked name, and processes
/// downloading the same wheel at once each rename a whole copy of the same bytes into place). If
/// the download fails while a cached copy of other bytes is there, the error names that mismatch.
pub(crate) fn ensure(
    entry: &LockEntry,
    fetch: &dyn Fetch,
    wheels: &Path,
) -> Result<Wheel, InputError> {
    let path = wheels.join(&entry.file);
    let mut stale = None;
    if fs::symlink_metadata(&path).is_ok() {
        match Wheel::open_locked(&path, entry) {
            Ok(wheel) => return Ok(wheel),
            Err(InputError::HashMismatch { actual, .. }) => {
                stale = Some(format!("sha256 {actual}"));
            }
            Err(InputError::NotRegular { kind, .. }) => stale = Some(kind.to_owned()),
            Err(e) => return Err(e),
        }
    }
    let tmp = Temporary::new(wheels, DOWNLOAD_PREFIX)?;
    report(&format!(
        "downloading {} ({}) into {}",
        entry.spec(),
        entry.file,
        wheels.display()
    ));
    if let Err(e) = fetch.fetch(&entry.spec(), tmp.path()) {
        return Err(match stale {
            Some(found) => InputError::CachedMismatch {
                path,
                found,
                expected: entry.sha256.clone(),
                detail: match e {
                    InputError::Download { detail, .. } => detail,
                    InputError::Unreachable { detail, .. } => {
                        format!("the package index is unreachable: {detail}")
                    }
                    other => other.to_string(),
                },
            },
            None => e,
        });
    }
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
    let mut wheel = Wheel::open_locked(&got, entry).map_err(|e| match e {
        InputError::HashMismatch {
            file,
            actual,
            expected,
            ..
        } => InputError::DownloadMismatch {
            file,
            actual,
            expected,
        },
        other => other,
    })?;
    let size = fs::metadata(&got).map_err(InputError::io(&got))?.len();
    fs::rename(&got, &path).map_err(InputError::io(&path))?;
    wheel.path = path;
    report(&format!(
        "downloaded {}: {}, cached as {}",
        entry.spec(),
        human_size(size),
        wheel.path.display()
    ));
    Ok(wheel)
}

/// `24.6 MB (24567890 bytes)`.
fn human_size(bytes: u64) -> String {
    format!("{:.1} MB ({bytes} bytes)", bytes as f64 / 1e6)
}

/// A writer that hashes what it passes on, counts it, and takes its CRC-32.
struct Hashing<W> {
    inner: W,
    sha256: Sha256,
    crc: Crc32,
    len: u64,
}

impl<W> Hashing<W> {
    fn new(inner: W) -> Hashing<W> {
        Hashing {
            inner,
            sha256: Sha256::new(),
            crc: Crc32::new(),
            len: 0,
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha256.update(&buf[..n]);
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
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
    fn record_lines_and_their_base64() {
        // sha256 of "a\n" is 87428fc5...
        let record = "pkg/a.h,sha256=h0KPxSKAPTEGXnvOPPA_5HUJZjHl4Hu9eg_eYMTPJcc,2\n\"pkg/b,c.h\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\npkg.dist-info/RECORD,,\n";
        let files = parse_record(record, "pkg.dist-info/RECORD").unwrap();
        assert_eq!(
            (files["pkg/a.h"].sha256.as_str(), files["pkg/a.h"].size),
            (super::super::files::sha256_hex(b"a\n").as_str(), 2)
        );
        assert_eq!(
            files["pkg/b,c.h"].sha256,
            super::super::files::sha256_hex(b"")
        );
        assert_eq!(files.len(), 2);
        for (bad, want) in [
            (
                format!("{record}pkg/a.h,sha256=h0KPxSKAPTEGXnvOPPA_5HUJZjHl4Hu9eg_eYMTPJcc,2\n"),
                "lists pkg/a.h twice",
            ),
            ("pkg/a.h,,2\n".to_owned(), "gives pkg/a.h no SHA-256"),
            ("pkg/a.h,md5=abc,2\n".to_owned(), "gives pkg/a.h no SHA-256"),
            (
                "pkg/a.h,sha256=h0KPxSKAPTEGXnvOPPA_5HUJZjHl4Hu9eg_eYMTPJcc,x\n".to_owned(),
                "no size",
            ),
        ] {
            let err = parse_record(&bad, "pkg.dist-info/RECORD").unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn pip_failures_name_their_cause() {
        let dir = Path::new("/cache/wheels/.download-x");
        let offline = "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a new connection: [Errno 111] Connection refused')': /simple/x/\nERROR: Could not find a version that satisfies the requirement x==1 (from versions: none)\nERROR: No matching distribution found for x==1\n";
        assert_eq!(
            pip_failure("x==1", dir, offline, "exit status: 1").to_string(),
            "could not download x==1: the package index is unreachable ([Errno 111] Connection refused); check the network connection, or the index pip is configured with (PIP_INDEX_URL)"
        );
        let full = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n";
        let msg = pip_failure("x==1", dir, full, "exit status: 1").to_string();
        assert!(
            msg.starts_with("/cache/wheels/.download-x: the disk is full (pip: ERROR"),
            "{msg}"
        );
        let none = "ERROR: No matching distribution found for x==1\n";
        assert!(matches!(
            pip_failure("x==1", dir, none, "exit status: 1"),
            InputError::Download { .. }
        ));
    }
}
