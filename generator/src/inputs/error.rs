//! Why an input could not be obtained: [`InputError`], one line per failure that says what to do.

use std::path::PathBuf;

use crate::target::Ctk;

/// Why an input could not be obtained. Each message is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// `pip download` failed or could not be run.
    #[error(
        "could not download {spec}: {detail}; check that `python3 -m pip` works and PyPI is reachable"
    )]
    Download {
        /// `name==version`.
        spec: String,
        /// pip's last line on stderr, or why pip could not run.
        detail: String,
    },
    /// pip succeeded but did not produce the file the lock names.
    #[error(
        "pip downloaded {spec} as {got} but generator/inputs.lock names {expected}; update the lock if the pin changed on purpose"
    )]
    UnexpectedFile {
        /// `name==version`.
        spec: String,
        /// What pip wrote.
        got: String,
        /// What the lock names.
        expected: String,
    },
    /// A wheel's SHA-256 differs from the lock.
    #[error(
        "{file}: sha256 {actual} does not match the lock ({expected}); delete {} and retry, or update generator/inputs.lock if the pin changed on purpose",
        path.display()
    )]
    HashMismatch {
        /// The wheel file name.
        file: String,
        /// Its SHA-256.
        actual: String,
        /// The lock's SHA-256.
        expected: String,
        /// Where it lies.
        path: PathBuf,
    },
    /// A wheel entry would land outside the unpack folder.
    #[error(
        "{}: entry '{entry}' is unsafe (absolute, '..' or a link), so nothing was unpacked; delete the wheel and retry",
        wheel.display()
    )]
    UnsafeEntry {
        /// The wheel.
        wheel: PathBuf,
        /// The entry's name as stored.
        entry: String,
    },
    /// A wheel is not a readable zip, or holds an entry that cannot be read as it is stored.
    #[error("{}: not a readable wheel ({detail}); delete it and retry", wheel.display())]
    Zip {
        /// The wheel.
        wheel: PathBuf,
        /// What is wrong, in the zip reader's words or the generator's (one line).
        detail: String,
    },
    /// A wheel has nothing under the folder generation needs.
    #[error(
        "{}: has no entries under {prefix}; the pinned package's layout changed, fix its pin in generator/src/inputs.rs",
        wheel.display()
    )]
    NothingToUnpack {
        /// The wheel.
        wheel: PathBuf,
        /// The folder (or file) that was looked for.
        prefix: String,
    },
    /// The lock has no line for a pin.
    #[error(
        "generator/inputs.lock has no entry for {spec}; add `{spec} <wheel file> <sha256>` to it"
    )]
    NotLocked {
        /// `name==version`.
        spec: String,
    },
    /// The lock pins no headers for a target.
    #[error(
        "CTK {ctk} has no pinned inputs: generator/inputs.lock pins {pinned}; pin it with cargo xtask pin --ctk {ctk}"
    )]
    NotPinned {
        /// The target asked for.
        ctk: Ctk,
        /// The targets the lock pins, spelled out.
        pinned: String,
    },
    /// No known wheel layout for a CUDA major version.
    #[error(
        "CTK {ctk}: the generator knows where the header wheels of CUDA 12 and 13 keep their headers, not those of CUDA {major}; teach generator/src/inputs.rs the layout"
    )]
    UnknownLayout {
        /// The target.
        ctk: Ctk,
        /// Its major version.
        major: u32,
    },
    /// The lock file cannot be parsed.
    #[error(
        "generator/inputs.lock line {line}: {detail}; each line is `<name>==<version> <wheel file> <sha256>`"
    )]
    BadLock {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A header generation reads is missing.
    #[error("no {header} in {dirs}; {hint}")]
    MissingHeader {
        /// The header, e.g. `crt/host_defines.h`.
        header: String,
        /// The include folders searched, comma-separated.
        dirs: String,
        /// What to do.
        hint: String,
    },
    /// `cuda.h` has no `#define CUDA_VERSION <n>`.
    #[error("{}: has no `#define CUDA_VERSION <n>`; it is not a CUDA cuda.h", path.display())]
    NoCudaVersion {
        /// The `cuda.h` read.
        path: PathBuf,
    },
    /// The headers are of another CUDA version than the target.
    #[error(
        "{what} is CUDA {found} (CUDA_VERSION {found_raw}) but --ctk {ctk} was asked for; {hint}"
    )]
    VersionMismatch {
        /// What was read, e.g. `--cuda-home /usr/local/cuda`.
        what: String,
        /// Its version as `major.minor`.
        found: String,
        /// Its `CUDA_VERSION`.
        found_raw: u32,
        /// The target asked for.
        ctk: Ctk,
        /// What to do.
        hint: String,
    },
    /// `--cuda-home` is not a toolkit root.
    #[error(
        "--cuda-home {} has no include/cuda.h; point --cuda-home at a CUDA toolkit root (the folder holding include/cuda.h)",
        cuda_home.display()
    )]
    NoCudaH {
        /// The folder given.
        cuda_home: PathBuf,
    },
    /// Neither the pinned libclang nor an override is available.
    #[error(
        "no libclang obtainable: the pinned {spec} could not be fetched ({detail}); set LIBCLANG_PATH to a folder holding libclang.so to use a local one"
    )]
    NoLibclang {
        /// The pinned wheel, `libclang==<version>`.
        spec: String,
        /// Why the pinned one failed.
        detail: String,
    },
    /// `LIBCLANG_PATH` names no libclang that clang-sys could load.
    #[error("LIBCLANG_PATH={} {detail}", path.display())]
    BadLibclangPath {
        /// The value of `LIBCLANG_PATH`.
        path: PathBuf,
        /// What is wrong, and what to do.
        detail: String,
    },
    /// gcc is needed for clang's `<stddef.h>` and friends but could not be run.
    #[error(
        "`gcc -print-file-name=include` failed ({detail}); install gcc, whose include folder supplies <stddef.h> to the pinned libclang"
    )]
    GccMissing {
        /// Why it failed.
        detail: String,
    },
    /// A wheel's RECORD disagrees with the bytes of one of its entries.
    #[error(
        "{}: entry {entry} does not match the wheel's own RECORD ({detail}); delete the wheel and retry, or pin another release",
        wheel.display()
    )]
    InconsistentWheel {
        /// The wheel.
        wheel: PathBuf,
        /// The entry.
        entry: String,
        /// What differs.
        detail: String,
    },
    /// An input that must be read is not a regular file (a FIFO would block the reader).
    #[error("{} is {kind}, not a regular file; {hint}", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead (`a FIFO`, `a folder`).
        kind: &'static str,
        /// What to do.
        hint: String,
    },
    /// The package index could not be reached (pip's connection failed), so nothing was
    /// downloaded.
    #[error(
        "could not download {spec}: the package index is unreachable ({detail}); check the network connection, or the index pip is configured with (PIP_INDEX_URL)"
    )]
    Unreachable {
        /// `name==version` (or a range).
        spec: String,
        /// pip's line that names the connection failure.
        detail: String,
    },
    /// A disk filled up while an input was written.
    #[error("{}: the disk is full ({detail}); free some space there and retry", path.display())]
    DiskFull {
        /// Where the write failed (a file, or the folder pip wrote into).
        path: PathBuf,
        /// What the system said.
        detail: String,
    },
    /// A freshly downloaded wheel differs from the lock; it was not cached.
    #[error(
        "downloaded {file}: sha256 {actual} does not match the lock ({expected}), so it was not cached; the index serves other bytes than were pinned: check the index, or run cargo xtask pin --ctk <target> --repin if the release changed on purpose"
    )]
    DownloadMismatch {
        /// The wheel file name.
        file: String,
        /// The SHA-256 of what was downloaded.
        actual: String,
        /// The lock's SHA-256.
        expected: String,
    },
    /// The cached wheel differs from the lock and a fresh copy could not be downloaded.
    #[error(
        "{}: the cached wheel ({found}) does not match the lock (sha256 {expected}), and downloading it again failed ({detail}); delete it and retry with the network, or update generator/inputs.lock if the pin changed on purpose",
        path.display()
    )]
    CachedMismatch {
        /// The cached wheel.
        path: PathBuf,
        /// What it is: `sha256 <hex>`, or `a FIFO` for a file that is not regular.
        found: String,
        /// The lock's SHA-256.
        expected: String,
        /// Why the download failed (one line).
        detail: String,
    },
    /// A wheel breaks the rules a wheel keeps (RECORD, unique names, a size cap), so nothing of it
    /// is trusted.
    #[error(
        "{}: {problem}, so nothing of it is trusted or unpacked; delete it and retry, or pin another release",
        wheel.display()
    )]
    UntrustedWheel {
        /// The wheel.
        wheel: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path operated on.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl InputError {
    /// The error of a failed file operation on `path`; a full disk says so.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> InputError {
        let path = path.into();
        move |source| InputError::from_io(path, source)
    }

    /// [`InputError::io`], applied.
    pub(crate) fn from_io(path: PathBuf, source: std::io::Error) -> InputError {
        if source.kind() == std::io::ErrorKind::StorageFull {
            InputError::DiskFull {
                path,
                detail: source.to_string(),
            }
        } else {
            InputError::Io { path, source }
        }
    }
}
