//! What generation reads, fetched and checked: the pinned CUDA header packages (or a local toolkit)
//! and the pinned libclang, each hash-checked against `generator/inputs.lock` and described for
//! provenance.
//!
//! Wheels come from PyPI through `python3 -m pip download` into a cache folder chosen by the caller
//! (`<cache>/wheels/`), are checked against the lock, and are unpacked, only the part generation
//! needs, into `<cache>/unpacked/`. A cached wheel whose hash matches is reused without the network.
//! An unpacked tree is checked against its wheel on every use (see `inputs/unpacked.rs`); one that fails
//! is unpacked again from the hash-checked wheel, with one warning line. A download and an unpack
//! each print one line to stderr; a run that finds everything cached and intact prints nothing.

mod files;
mod headers;
mod libclang;
mod lock;
mod unpacked;
mod wheel;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::target::Ctk;

pub(crate) use files::kind as file_kind;
pub use files::sha256_file;
pub use headers::local_headers;
pub use libclang::{LIBCLANG_VERSION, local_libclang};
pub use lock::{LOCK_PATH, Lock, LockEntry, TargetPin};
pub use wheel::{Fetch, Pip, unpack_wheel, verify_wheel};

/// Prints one progress line of the inputs (a download, an unpack, a repaired cache) to stderr.
pub(crate) fn report(line: &str) {
    eprintln!("{line}");
}

/// Where the inputs come from, loaded once by the caller and passed down: the lock, the cache
/// folder, and the libclang to load (`LIBCLANG_PATH` as the caller read it, else the pinned one).
#[derive(Clone, Debug)]
pub struct InputConfig {
    /// The pinned packages (`generator/inputs.lock`).
    pub lock: Lock,
    /// The cache of downloaded and unpacked inputs (`<cache>/wheels/`, `<cache>/unpacked/`).
    pub cache: PathBuf,
    /// A libclang that overrides the pinned one (the user's `LIBCLANG_PATH`), or `None`.
    pub libclang_path: Option<PathBuf>,
}

/// Everything generation reads for one target.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// The CUDA headers.
    pub headers: Headers,
    /// The libclang bindgen loads.
    pub libclang: Libclang,
}

impl Inputs {
    /// Gathers the inputs for `ctk`: the headers of the toolkit at `cuda_home` when given, else the
    /// pinned header packages, and the pinned libclang (or the override, see [`libclang`]).
    pub fn gather(
        config: &InputConfig,
        ctk: Ctk,
        cuda_home: Option<&Path>,
    ) -> Result<Self, InputError> {
        let headers = match cuda_home {
            Some(dir) => local_headers(ctk, dir)?,
            None => pinned_headers(config, ctk)?,
        };
        Ok(Inputs {
            headers,
            libclang: libclang(config)?,
        })
    }

    /// Every provenance line, headers first.
    pub fn provenance(&self) -> Vec<Provenance> {
        let mut all = self.headers.source.clone();
        all.push(self.libclang.source.clone());
        all
    }
}

/// The CUDA headers of one target, checked: the three headers generation reads exist, `crt/` is
/// reachable from the include folders, and `cuda.h` defines the target's `CUDA_VERSION`.
#[derive(Clone, Debug)]
pub struct Headers {
    /// The target these headers were checked against.
    pub ctk: Ctk,
    /// The folders to pass as `-I`, in order.
    pub include_dirs: Vec<PathBuf>,
    /// `cuda.h` (the driver API).
    pub cuda_h: PathBuf,
    /// `cuda_runtime_api.h` (the runtime API).
    pub runtime_api_h: PathBuf,
    /// `cudaTypedefs.h` (one `PFN_` typedef per ABI version of each driver function).
    pub typedefs_h: PathBuf,
    /// The `CUDA_VERSION` that `cuda.h` defines, e.g. 13000.
    pub cuda_version: u32,
    /// Where the headers came from: one line per wheel, or one per header of a local toolkit.
    pub source: Vec<Provenance>,
}

/// The libclang that bindgen loads, and what clang needs besides it.
#[derive(Clone, Debug)]
pub struct Libclang {
    /// The library file itself, which [`Libclang::activate`] loads.
    pub library: PathBuf,
    /// The libclang version: [`LIBCLANG_VERSION`] for the pinned one, `"unknown"` for an override.
    pub version: String,
    /// Extra clang arguments: `-isystem <gcc's include folder>`, since the pinned libclang ships no
    /// resource headers such as `<stddef.h>`.
    pub clang_args: Vec<String>,
    /// Where it came from.
    pub source: Provenance,
    /// Set when `LIBCLANG_PATH` overrides the pinned libclang: a warning for the user.
    pub warning: Option<String>,
}

/// One input generation read, as recorded in the provenance of the generated files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The package (`nvidia-cuda-runtime`, `libclang`), or `cuda-home` for a local toolkit.
    pub name: String,
    /// The package version, or the toolkit's CUDA version (`12.9`).
    pub version: String,
    /// The wheel file name, or the path of a local file (`override: <library>` for the library
    /// that `LIBCLANG_PATH` leads clang-sys to).
    pub file: String,
    /// SHA-256 of that file, lower-case hex.
    pub sha256: String,
}

impl fmt::Display for Provenance {
    /// One line: `<name>==<version> <file> sha256:<hex>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}=={} {} sha256:{}",
            self.name, self.version, self.file, self.sha256
        )
    }
}

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
    /// A wheel is not a readable zip.
    #[error("{}: not a readable wheel ({source}); delete it and retry", wheel.display())]
    Zip {
        /// The wheel.
        wheel: PathBuf,
        /// What the zip reader said.
        source: zip::result::ZipError,
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
        "no libclang obtainable: the pinned libclang {LIBCLANG_VERSION} could not be fetched ({detail}); set LIBCLANG_PATH to a folder holding libclang.so to use a local one"
    )]
    NoLibclang {
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
    /// An unpacked tree still fails its check after being unpacked again.
    #[error(
        "{}: {problem}, even after unpacking it again from {wheel}; delete that folder and retry (the next run unpacks it from the hash-checked wheel)",
        root.display()
    )]
    Unpacked {
        /// The unpacked tree.
        root: PathBuf,
        /// The wheel file name.
        wheel: String,
        /// The first file that is wrong, and how.
        problem: String,
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
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> InputError {
        let path = path.into();
        move |source| InputError::Io { path, source }
    }
}

/// One pinned wheel and the part of it generation reads.
#[derive(Clone, Debug)]
struct Pin {
    /// `name==version`, as in the lock.
    spec: String,
    /// The folder (or single file) of the wheel to unpack.
    keep: &'static str,
    /// The folder, relative to the unpacked root, that generation uses (an include folder, or the
    /// folder holding `libclang.so`).
    dir: &'static str,
}

/// Where a CUDA major version's header wheels keep their headers: (folder of the headers wheel,
/// `crt/` of the crt wheel, include folder of the crt wheel).
fn layout(ctk: Ctk) -> Result<(&'static str, &'static str, &'static str), InputError> {
    match ctk.major() {
        // nvidia-cuda-runtime-cu12 and nvidia-cuda-nvcc-cu12.
        12 => Ok((
            "nvidia/cuda_runtime/include",
            "nvidia/cuda_nvcc/include/crt",
            "nvidia/cuda_nvcc/include",
        )),
        // nvidia-cuda-runtime and nvidia-cuda-crt.
        13 => Ok((
            "nvidia/cu13/include",
            "nvidia/cu13/include/crt",
            "nvidia/cu13/include",
        )),
        major => Err(InputError::UnknownLayout { ctk, major }),
    }
}

/// The PyPI packages that hold a CUDA major version's headers: (headers package, crt package).
pub fn header_packages(ctk: Ctk) -> Result<(&'static str, &'static str), InputError> {
    match ctk.major() {
        12 => Ok(("nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12")),
        13 => Ok(("nvidia-cuda-runtime", "nvidia-cuda-crt")),
        major => Err(InputError::UnknownLayout { ctk, major }),
    }
}

/// The header packages of a target, from the lock: the runtime package (cuda.h,
/// cuda_runtime_api.h, cudaTypedefs.h, ...) and the package that carries `crt/` (only `crt/` is
/// unpacked).
fn header_pins(lock: &Lock, ctk: Ctk) -> Result<[Pin; 2], InputError> {
    let target = lock.target(ctk)?;
    let (headers_dir, crt_keep, crt_dir) = layout(ctk)?;
    Ok([
        Pin {
            spec: target.headers.clone(),
            keep: headers_dir,
            dir: headers_dir,
        },
        Pin {
            spec: target.crt.clone(),
            keep: crt_keep,
            dir: crt_dir,
        },
    ])
}

/// The pinned libclang wheel.
const LIBCLANG_SPEC: &str = "libclang==18.1.1";

fn libclang_pin() -> Pin {
    Pin {
        spec: LIBCLANG_SPEC.to_owned(),
        keep: "libclang-18.1.1.data/platlib/clang/native/libclang.so",
        dir: "libclang-18.1.1.data/platlib/clang/native",
    }
}

/// Obtains pinned wheels: looks each up in a [`Lock`], reuses a cached copy whose hash matches,
/// fetches it otherwise, and unpacks the part generation reads.
pub struct Fetcher {
    lock: Lock,
    fetch: Box<dyn Fetch>,
}

impl Fetcher {
    /// A fetcher with the given lock and download step (tests pass their own).
    pub fn new(lock: Lock, fetch: Box<dyn Fetch>) -> Self {
        Fetcher { lock, fetch }
    }

    /// The lock of `config` and [`Pip`].
    pub fn pinned(config: &InputConfig) -> Self {
        Fetcher::new(config.lock.clone(), Box::new(Pip::default()))
    }

    /// The pinned headers of `ctk`, fetched into and unpacked under `cache`, and checked.
    pub fn headers(&self, ctk: Ctk, cache: &Path) -> Result<Headers, InputError> {
        let mut include_dirs = Vec::new();
        let mut source = Vec::new();
        for pin in header_pins(&self.lock, ctk)? {
            let (root, prov, _) = self.unpacked(&pin, cache)?;
            include_dirs.push(root.join(pin.dir));
            source.push(prov);
        }
        let specs = source
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect::<Vec<_>>()
            .join(", ");
        let mut headers = headers::check(ctk, include_dirs, &headers::Origin::Pinned(specs))?;
        headers.source = source;
        Ok(headers)
    }

    /// The pinned libclang, fetched into and unpacked under `cache`, with the clang arguments it
    /// needs. `LIBCLANG_PATH` is not consulted here (see [`libclang`]).
    pub fn libclang(&self, cache: &Path) -> Result<Libclang, InputError> {
        let pin = libclang_pin();
        let (root, source, records) = self.unpacked_libclang(&pin, cache)?;
        // The library's hash as just checked against the wheel (no second read of its 61 MB).
        let sha256 = records
            .iter()
            .find(|r| r.path == pin.keep)
            .map(|r| r.sha256.clone())
            .ok_or_else(|| InputError::NothingToUnpack {
                wheel: cache.join("wheels").join(&source.file),
                prefix: pin.keep.to_owned(),
            })?;
        let source = Provenance {
            sha256,
            file: format!("{}:{}", source.file, pin.keep),
            ..source
        };
        Ok(Libclang {
            library: root.join(pin.keep),
            version: LIBCLANG_VERSION.to_owned(),
            clang_args: libclang::gcc_include_args()?,
            source,
            warning: None,
        })
    }

    /// [`Fetcher::unpacked`] for libclang, once per process and tree: clang-sys loads the library
    /// once per process, so after the first generation has loaded the checked library a later check
    /// of its 61 MB could not change what bindgen runs.
    fn unpacked_libclang(
        &self,
        pin: &Pin,
        cache: &Path,
    ) -> Result<(PathBuf, Provenance, Vec<unpacked::FileRecord>), InputError> {
        type Checked = (PathBuf, Provenance, Vec<unpacked::FileRecord>);
        static CHECKED: std::sync::Mutex<Vec<Checked>> = std::sync::Mutex::new(Vec::new());
        let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        let entry = self.lock.get(&pin.spec)?;
        let root = cache.join("unpacked").join(entry.unpack_key(pin.keep));
        if let Some(done) = checked
            .iter()
            .find(|(r, p, _)| *r == root && *p == entry.provenance())
        {
            return Ok(done.clone());
        }
        let done = self.unpacked(pin, cache).map_err(|e| match e {
            InputError::Download { detail, .. } => InputError::NoLibclang { detail },
            other => other,
        })?;
        checked.push(done.clone());
        Ok(done)
    }

    /// The wheel of `spec` under `<cache>/wheels/`, hash-checked, fetched if absent or stale.
    pub fn wheel(&self, spec: &str, cache: &Path) -> Result<(PathBuf, &LockEntry), InputError> {
        let entry = self.lock.get(spec)?;
        let path = wheel::ensure(entry, &*self.fetch, &cache.join("wheels"))?;
        Ok((path, entry))
    }

    /// Unpacks `pin.keep` of the pinned wheel under `<cache>/unpacked/<key>/` (once) and checks
    /// that tree against the wheel on every call, before anything reads it; a tree that fails is
    /// unpacked again, with one warning line. Returns the root, the wheel's provenance and the
    /// checked files.
    fn unpacked(
        &self,
        pin: &Pin,
        cache: &Path,
    ) -> Result<(PathBuf, Provenance, Vec<unpacked::FileRecord>), InputError> {
        let (wheel_path, entry) = self.wheel(&pin.spec, cache)?;
        let root = cache.join("unpacked").join(entry.unpack_key(pin.keep));
        let present = fs::symlink_metadata(&root).is_ok();
        if present {
            match unpacked::check(&wheel_path, pin.keep, &root)? {
                Ok(records) => return Ok((root, entry.provenance(), records)),
                Err(problem) => report(&format!(
                    "warning: {}: {problem}; unpacking it again from {}, whose SHA-256 matches the lock",
                    root.display(),
                    entry.file
                )),
            }
            wheel::replace_unpacked(&wheel_path, pin.keep, &root)?;
        } else {
            report(&format!(
                "unpacking {} of {} into {}",
                pin.keep,
                entry.file,
                root.display()
            ));
            wheel::unpack_into_place(&wheel_path, pin.keep, &root)?;
        }
        match unpacked::check(&wheel_path, pin.keep, &root)? {
            Ok(records) => Ok((root, entry.provenance(), records)),
            Err(problem) => Err(InputError::Unpacked {
                root,
                wheel: entry.file.clone(),
                problem,
            }),
        }
    }
}

/// The pinned headers of `ctk`: fetched with pip (or reused) under the cache of `config`, checked
/// against its lock, unpacked and verified.
pub fn pinned_headers(config: &InputConfig, ctk: Ctk) -> Result<Headers, InputError> {
    Fetcher::pinned(config).headers(ctk, &config.cache)
}

/// The libclang for bindgen: the override of `config` when it has one (with a warning, see
/// [`local_libclang`]), else the pinned wheel fetched (or reused) under its cache.
pub fn libclang(config: &InputConfig) -> Result<Libclang, InputError> {
    match &config.libclang_path {
        Some(path) => local_libclang(path),
        None => Fetcher::pinned(config).libclang(&config.cache),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock committed beside this crate.
    fn committed_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("inputs.lock")
    }

    #[test]
    fn every_lock_line_is_used_by_a_target_or_is_libclang() {
        let lock = Lock::load(&committed_path()).unwrap();
        let mut used = vec![LIBCLANG_SPEC.to_owned()];
        for ctk in lock.targets() {
            for pin in header_pins(&lock, ctk).unwrap() {
                lock.get(&pin.spec).unwrap();
                used.push(pin.spec);
            }
        }
        for entry in lock.entries() {
            assert!(
                used.contains(&entry.spec()),
                "{} is locked but no target uses it",
                entry.spec()
            );
        }
    }

    #[test]
    fn the_committed_lock_renders_as_it_is_written() {
        // `cargo xtask pin` rewrites the lock with `render`: the committed file is in that form.
        let path = committed_path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(Lock::parse(&text).unwrap().render(), text);
    }

    #[test]
    fn crt_is_kept_under_an_include_dir() {
        for major in [12, 13] {
            let (headers, crt_keep, crt_dir) = layout(Ctk::new(major, 0)).unwrap();
            assert!(headers.ends_with("/include"));
            assert_eq!(crt_keep, format!("{crt_dir}/crt"));
        }
        assert!(layout(Ctk::new(14, 0)).is_err());
        let pin = libclang_pin();
        assert!(pin.keep.starts_with(pin.dir));
    }
}
