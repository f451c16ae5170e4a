//! What generation reads, fetched and checked: the pinned CUDA header packages (or a local toolkit)
//! and the pinned libclang, each hash-checked against `generator/inputs.lock` and described for
//! provenance.
//!
//! The input cache (a folder chosen by the caller) keeps the wheels, under `<cache>/wheels/`: they
//! come from PyPI through `python3 -m pip download`, and a cached wheel whose SHA-256 is the
//! lock's is reused without the network. A wheel is opened once (`inputs/wheel.rs`): hashed,
//! checked against its own RECORD, and read from that one open file. A target's headers are
//! unpacked from their wheels on every run, into a temporary folder that the [`Headers`] value
//! owns (deleted with it), each file's size and SHA-256 checked against the RECORD as it is
//! written. The one file the cache keeps unpacked is libclang's library (61 MB), under
//! `<cache>/libclang/`, hashed against its wheel's RECORD by every process before it is loaded
//! (`inputs/libclang.rs`). Processes may share one cache: everything they write there is written
//! into a temporary folder of their own and renamed into place. A download and an unpack into the
//! cache each print one line to stderr; a run that finds everything cached and intact prints
//! nothing.
//!
//! The modules form a chain, none importing one that imports it back: `error` (the error type),
//! `files` (opening, hashing, the cache's temporary folders), `lock` (the lock file and
//! provenance), `wheel` (fetching and reading wheels), `headers` and `libclang` (the checked
//! inputs), and this module, which puts them together.

mod error;
mod files;
mod headers;
mod libclang;
mod lock;
mod wheel;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::history::History;
use crate::target::Ctk;

pub use error::InputError;
pub(crate) use files::kind as file_kind;
pub use files::{PIN_PREFIX, Temporary, sha256_file};
pub(crate) use files::{hex, sha256_hex};
pub use headers::{Headers, local_headers};
pub(crate) use libclang::gcc_include_args;
pub use libclang::{LIBCLANG_VERSION, Libclang, local_libclang};
pub use lock::{LOCK_PATH, Lock, LockEntry, Provenance, TargetPin};
pub use wheel::{Fetch, MAX_UNPACKED_BYTES, Pip, Wheel, unpack_wheel, verify_wheel};

/// Where the inputs come from, loaded once by the caller and passed down: the lock, the cache
/// folder, and the libclang to load (`LIBCLANG_PATH` as the caller read it, else the pinned one).
#[derive(Clone, Debug)]
pub struct InputConfig {
    /// The pinned packages (`generator/inputs.lock`).
    pub lock: Lock,
    /// The cache of downloaded inputs (`<cache>/wheels/`) and the unpacked libclang
    /// (`<cache>/libclang/`).
    pub cache: PathBuf,
    /// A libclang that overrides the pinned one (the user's `LIBCLANG_PATH`), or `None`.
    pub libclang_path: Option<PathBuf>,
}

/// Everything generation reads for one target.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// The CUDA headers.
    pub headers: Headers,
    /// Their histories, read by the first call of [`Inputs::histories`] (shared by clones).
    histories: Arc<Later<Histories>>,
    /// The libclang bindgen loads.
    pub libclang: Libclang,
}

/// The older headers of a target's major, and what they give.
#[derive(Debug)]
pub struct Histories {
    /// The runtime functions declared by `cuda_runtime_api.h` of every pinned target of the
    /// major older than this one, and of these headers: where each runtime function's minimum
    /// version comes from.
    pub runtime: History,
    /// The driver ABIs declared by `cudaTypedefs.h` of the same targets: where each driver
    /// function's minimum driver comes from, where it is newer than its ABI version.
    pub driver: History,
    /// Where the older headers came from: one line per header, `<wheel>:<path>` and the
    /// header's SHA-256 (checked against the hash-checked wheel's RECORD).
    pub source: Vec<Provenance>,
}

/// A value made once, by the first caller that gets it made; a caller whose making fails gets
/// its error, and the next one tries again.
#[derive(Debug)]
struct Later<T> {
    making: Mutex<()>,
    made: OnceLock<T>,
}

impl<T> Default for Later<T> {
    fn default() -> Self {
        Later {
            making: Mutex::new(()),
            made: OnceLock::new(),
        }
    }
}

impl<T> Later<T> {
    fn get<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let _making = self.making.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(made) = self.made.get() {
            return Ok(made);
        }
        let made = make()?;
        Ok(self.made.get_or_init(|| made))
    }
}

impl Inputs {
    /// Gathers the inputs for `ctk`: the headers of the toolkit at `cuda_home` when given, else the
    /// pinned header packages, and the pinned libclang (or the override, see [`libclang`]).
    pub fn gather(
        config: &InputConfig,
        ctk: Ctk,
        cuda_home: Option<&Path>,
    ) -> Result<Self, InputError> {
        let mut all = Inputs::gather_all(config, &[(ctk, cuda_home)])?;
        Ok(all.remove(0))
    }

    /// [`Inputs::gather`] for each `(ctk, cuda_home)` of `asked`, with one libclang for all
    /// (clang-sys loads one library per process, so one check of its 61 MB is enough). The wheels
    /// the cache lacks are downloaded first, a few at once (`prefetch`), those of the histories
    /// too. When the cache then holds every wheel, each target's headers and the libclang are
    /// gathered on threads of their own (mostly hashing: about 0.1 s for 12.9); when it does not,
    /// one after the other, so that downloads and their errors (a full disk, an unreachable
    /// index) come as a serial run gives them. Either way the error returned is the one a serial
    /// run meets first: the first target's headers, libclang, then each other target's. The
    /// histories are read later, where they are needed ([`Inputs::histories`]).
    pub fn gather_all(
        config: &InputConfig,
        asked: &[(Ctk, Option<&Path>)],
    ) -> Result<Vec<Self>, InputError> {
        let Some((head, tail)) = asked.split_first() else {
            return Ok(Vec::new());
        };
        let mut specs = Vec::new();
        if config.libclang_path.is_none() {
            specs.push(LIBCLANG_SPEC.to_owned());
        }
        for &(ctk, cuda_home) in asked {
            // Its two header wheels (unless the headers come from a local toolkit), then the
            // older runtime headers of its history.
            let read = config.lock.specs_read_by(ctk).unwrap_or_default();
            let skip = if cuda_home.is_none() { 0 } else { 2 };
            specs.extend(read.into_iter().skip(skip));
        }
        // A target's own part: its headers.
        let part = |&(ctk, cuda_home): &(Ctk, Option<&Path>)| match cuda_home {
            Some(dir) => local_headers(ctk, dir),
            None => pinned_headers(config, ctk),
        };
        let (head, clang, tail) = if prefetch(config, &specs) {
            std::thread::scope(|scope| {
                let clang = scope.spawn(|| libclang(config));
                let tail: Vec<_> = (tail.iter())
                    .map(|asked| scope.spawn(move || part(asked)))
                    .collect();
                let head = part(head);
                let joined = |h: std::thread::ScopedJoinHandle<_>| h.join().expect("no panic");
                let tail: Vec<_> = tail.into_iter().map(joined).collect();
                (head, clang.join().expect("no panic"), tail)
            })
        } else {
            let head = part(head)?;
            let clang = libclang(config)?;
            let mut parts = Vec::new();
            for asked in tail {
                parts.push(Ok(part(asked)?));
            }
            (Ok(head), Ok(clang), parts)
        };
        let (head, clang) = (head?, clang?);
        let mut all = Vec::with_capacity(asked.len());
        for headers in std::iter::once(Ok(head)).chain(tail) {
            all.push(Inputs {
                headers: headers?,
                histories: Arc::default(),
                libclang: clang.clone(),
            });
        }
        Ok(all)
    }

    /// The histories of the headers' major, read from their cached wheels by the first call
    /// (by either API of a one-target regen, on its thread, once bindgen has read its headers:
    /// about 40 ms for 12.9 that no longer keep both APIs from starting).
    pub fn histories(&self, config: &InputConfig) -> Result<&Histories, InputError> {
        self.histories.get(|| histories(config, &self.headers))
    }

    /// Every provenance line: the headers, the older runtime headers, libclang.
    pub fn provenance(&self, config: &InputConfig) -> Result<Vec<Provenance>, InputError> {
        let mut all = self.headers.source.clone();
        all.extend(self.histories(config)?.source.iter().cloned());
        all.push(self.libclang.source.clone());
        Ok(all)
    }
}

/// The runtime and driver [`History`] of `headers`' major: `cuda_runtime_api.h` and
/// `cudaTypedefs.h` of every target the lock pins of that major and older than `headers.ctk`
/// (read from its hash-checked headers wheel, each file checked against the wheel's RECORD,
/// nothing unpacked), then `headers`' own; with one provenance line per older header.
fn histories(config: &InputConfig, headers: &Headers) -> Result<Histories, InputError> {
    let ctk = headers.ctk;
    let (headers_dir, _, _) = layout(ctk)?;
    let fetcher = Fetcher::pinned(config);
    let (mut runtime, mut driver, mut source) = (Vec::new(), Vec::new(), Vec::new());
    for older in config.lock.history(ctk) {
        let spec = &config.lock.target(older)?.headers;
        let (wheel, entry) = fetcher.wheel(spec, &config.cache)?;
        for (name, texts) in [
            ("cuda_runtime_api.h", &mut runtime),
            ("cudaTypedefs.h", &mut driver),
        ] {
            let path = format!("{headers_dir}/{name}");
            let bytes = wheel.read_file(&path)?;
            source.push(Provenance {
                sha256: sha256_hex(&bytes),
                file: format!("{}:{path}", entry.file),
                ..entry.provenance()
            });
            texts.push((older, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for (path, texts) in [
        (&headers.runtime_api_h, &mut runtime),
        (&headers.typedefs_h, &mut driver),
    ] {
        let own = files::read_regular(path, "replace it with the header of the toolkit")?;
        texts.push((ctk, String::from_utf8_lossy(&own).into_owned()));
    }
    fn of(texts: &[(Ctk, String)]) -> impl Iterator<Item = (Ctk, &str)> {
        texts.iter().map(|(ctk, text)| (*ctk, text.as_str()))
    }
    Ok(Histories {
        runtime: History::runtime(of(&runtime)),
        driver: History::driver(of(&driver)),
        source,
    })
}

/// One pinned header wheel and the part of it generation reads.
#[derive(Clone, Debug)]
struct Pin {
    /// `name==version`, as in the lock.
    spec: String,
    /// The folder of the wheel to unpack.
    keep: &'static str,
    /// The include folder, relative to the unpacked root, that generation uses.
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
pub(crate) const LIBCLANG_SPEC: &str = "libclang==18.1.1";

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

    /// The pinned headers of `ctk`, from its wheels fetched into (or found in) `cache`, unpacked
    /// into a temporary folder of the returned value (one subfolder per wheel), and checked.
    pub fn headers(&self, ctk: Ctk, cache: &Path) -> Result<Headers, InputError> {
        let folder = tempfile::Builder::new()
            .prefix("hostcb-headers-")
            .tempdir()
            .map_err(InputError::io(std::env::temp_dir()))?;
        let mut include_dirs = Vec::new();
        let mut source = Vec::new();
        for pin in header_pins(&self.lock, ctk)? {
            let (wheel, entry) = self.wheel(&pin.spec, cache)?;
            let root = folder.path().join(&entry.name);
            std::fs::create_dir(&root).map_err(InputError::io(&root))?;
            wheel.unpack(pin.keep, &root)?;
            include_dirs.push(root.join(pin.dir));
            source.push(entry.provenance());
        }
        let specs = source
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect::<Vec<_>>()
            .join(", ");
        let mut headers = headers::check(ctk, include_dirs, &headers::Origin::Pinned(specs))?;
        headers.source = source;
        headers.folder = Some(std::sync::Arc::new(folder));
        Ok(headers)
    }

    /// The pinned libclang, its wheel fetched into (or found in) `cache` and its library kept
    /// there unpacked (see `inputs/libclang.rs`), with the clang arguments it needs.
    /// `LIBCLANG_PATH` is not consulted here (see [`libclang`]).
    pub fn libclang(&self, cache: &Path) -> Result<Libclang, InputError> {
        let (wheel, entry) = self.wheel(LIBCLANG_SPEC, cache).map_err(|e| match e {
            InputError::Download { detail, .. } => InputError::NoLibclang {
                spec: LIBCLANG_SPEC.to_owned(),
                detail,
            },
            other => other,
        })?;
        let (library, sha256) = libclang::cached_library(&wheel, &cache.join("libclang"))?;
        Ok(Libclang {
            library,
            version: LIBCLANG_VERSION.to_owned(),
            clang_args: libclang::gcc_include_args()?,
            source: Provenance {
                sha256,
                file: format!("{}:{}", entry.file, libclang::LIBCLANG_IN_WHEEL),
                ..entry.provenance()
            },
            warning: None,
        })
    }

    /// The wheel of `spec` under `<cache>/wheels/`, opened and hash-checked, fetched if absent or
    /// stale.
    pub fn wheel(&self, spec: &str, cache: &Path) -> Result<(Wheel, &LockEntry), InputError> {
        let entry = self.lock.get(spec)?;
        let wheel = wheel::ensure(entry, &*self.fetch, &cache.join("wheels"))?;
        Ok((wheel, entry))
    }
}

/// Downloads the wheels of `specs` that the cache of `config` lacks, [`PREFETCHED_AT_ONCE`] at a
/// time, before a run reads its inputs, and says whether the cache now holds every one. Each
/// download is a pip run of about a second, mostly Python starting and the index answering, and
/// generating 12.9 alone reads ten wheels and libclang's. A wheel the cache holds is left to the
/// reader, which hash-checks it. Nothing here is an error: once a download fails no other
/// starts, and the reader, going one wheel after the other, meets the failure where a serial run
/// does, and says it as one does (a full disk, say, fails whichever downloads ran at once; the
/// run then downloads alone). One missing wheel is left to the reader too.
fn prefetch(config: &InputConfig, specs: &[String]) -> bool {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let wheels = config.cache.join("wheels");
    let mut missing: Vec<&LockEntry> = Vec::new();
    for spec in specs {
        if let Ok(entry) = config.lock.get(spec)
            && !missing.iter().any(|m| m.file == entry.file)
            && std::fs::symlink_metadata(wheels.join(&entry.file)).is_err()
        {
            missing.push(entry);
        }
    }
    match missing.len() {
        0 => return true,
        1 => return false,
        _ => {}
    }
    let (pip, next, failed) = (Pip::default(), AtomicUsize::new(0), AtomicBool::new(false));
    std::thread::scope(|scope| {
        for _ in 0..PREFETCHED_AT_ONCE.min(missing.len()) {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let Some(entry) = missing.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    if wheel::ensure(entry, &pip, &wheels).is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    !failed.into_inner()
}

/// How many pip runs [`Inputs::gather_all`] keeps going at once when wheels are missing.
pub const PREFETCHED_AT_ONCE: usize = 4;

/// The pinned headers of `ctk`: their wheels fetched with pip (or reused) under the cache of
/// `config` and checked against its lock, the headers unpacked into a temporary folder and
/// checked.
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

    #[test]
    fn a_later_value_is_made_once_and_a_failed_making_is_tried_again() {
        let later = Later::default();
        let made = std::sync::atomic::AtomicUsize::new(0);
        let make = |ok: bool| {
            made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            if ok { Ok(7) } else { Err("no") }
        };
        assert_eq!(later.get(|| make(false)), Err("no"));
        let got: Vec<_> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| later.get(|| make(true))))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(got, vec![Ok(&7); 4]);
        // Once by the failed call, once by the four at once.
        assert_eq!(made.into_inner(), 2);
    }

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
        assert!(
            libclang::LIBCLANG_IN_WHEEL
                .starts_with(&format!("{}.data/", LIBCLANG_SPEC.replace("==", "-")))
        );
    }
}
