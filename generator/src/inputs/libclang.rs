//! The libclang bindgen loads: the pinned library, kept in the input cache; a `LIBCLANG_PATH`
//! override; and the clang arguments that stand in for the resource headers the pinned libclang
//! lacks.
//!
//! The pinned library is the one file of the inputs the cache keeps unpacked (61 MB; a target's
//! headers are unpacked from their wheels on every run instead): at
//! `<cache>/libclang/<sha256>/libclang.so`, named by the SHA-256 that the RECORD of the
//! hash-checked wheel states for it. Every process hashes it before loading it and compares
//! that with the RECORD; one that is missing or differs is unpacked again from the wheel (one
//! progress line, or one warning naming what was wrong), into a [`Temporary`] beside it, each
//! byte checked against the RECORD as it is written, and renamed into place. Processes that do
//! this at once each rename a whole file of the same bytes, so none needs a lock and none ever
//! sees a partial library. What the check cannot rule out is a file rewritten after it, before
//! clang-sys loads it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use super::error::InputError;
use super::files::{Temporary, UNPACK_PREFIX, open_regular, report, sha256_file, sha256_reader};
use super::lock::Provenance;
use super::wheel::{FileRecord, Wheel};

/// The version of the pinned libclang wheel.
pub const LIBCLANG_VERSION: &str = "18.1.1";

/// Where the pinned libclang wheel keeps the library.
pub(crate) const LIBCLANG_IN_WHEEL: &str = "libclang-18.1.1.data/platlib/clang/native/libclang.so";

/// What a cached library is, against what the wheel states.
enum Found {
    /// The file the wheel states.
    Intact,
    /// Nothing.
    Absent,
    /// Something else: what, and how.
    Wrong(String),
}

/// The pinned library in the cache folder `dir`, checked (or unpacked again) as the module
/// documentation says: its path and its SHA-256, as the RECORD of the hash-checked `wheel`
/// states it.
pub(crate) fn cached_library(wheel: &Wheel, dir: &Path) -> Result<(PathBuf, String), InputError> {
    let want = match &wheel.stated(LIBCLANG_IN_WHEEL)?[..] {
        [one] if one.path == LIBCLANG_IN_WHEEL => one.clone(),
        _ => {
            return Err(InputError::NothingToUnpack {
                wheel: wheel.path().to_owned(),
                prefix: LIBCLANG_IN_WHEEL.to_owned(),
            });
        }
    };
    let library = dir.join(&want.sha256).join("libclang.so");
    let file_name = wheel
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match found(&library, &want)? {
        Found::Intact => return Ok((library, want.sha256)),
        Found::Absent => report(&format!(
            "unpacking {LIBCLANG_IN_WHEEL} of {file_name} into {}",
            library.display()
        )),
        Found::Wrong(what) => report(&format!(
            "warning: {}: {what}; unpacking it again from {file_name}, whose SHA-256 matches the lock",
            library.display()
        )),
    }
    let tmp = Temporary::new(dir, UNPACK_PREFIX)?;
    wheel.unpack(LIBCLANG_IN_WHEEL, tmp.path())?;
    let folder = library.parent().unwrap_or(dir);
    fs::create_dir_all(folder).map_err(InputError::io(folder))?;
    fs::rename(tmp.path().join(LIBCLANG_IN_WHEEL), &library).map_err(|e| {
        if library.is_dir() {
            InputError::NotRegular {
                path: library.clone(),
                kind: "a folder",
                hint:
                    "delete it; the next run writes the library there from the hash-checked wheel"
                        .to_owned(),
            }
        } else {
            InputError::from_io(library.clone(), e)
        }
    })?;
    Ok((library, want.sha256))
}

/// Whether the file at `path` is the one `want` states.
fn found(path: &Path, want: &FileRecord) -> Result<Found, InputError> {
    let file = match open_regular(path, "") {
        Ok(file) => file,
        Err(InputError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(Found::Absent);
        }
        Err(InputError::NotRegular { kind, .. }) => {
            return Ok(Found::Wrong(format!("it is {kind}, not a regular file")));
        }
        Err(e) => return Err(e),
    };
    let size = file.metadata().map_err(InputError::io(path))?.len();
    if size != want.size {
        return Ok(Found::Wrong(format!(
            "it has {size} bytes where the wheel's entry has {}",
            want.size
        )));
    }
    let (sha256, _) = sha256_reader(file).map_err(InputError::io(path))?;
    if sha256 != want.sha256 {
        return Ok(Found::Wrong(format!(
            "it differs from the wheel's entry (sha256 {sha256}, the wheel's {})",
            want.sha256
        )));
    }
    Ok(Found::Intact)
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

impl Libclang {
    /// Makes this libclang the one bindgen uses on the calling thread: loaded once per process,
    /// then handed to clang-sys for this thread (clang-sys keeps its library per thread, and
    /// bindgen loads one of its own only on a thread that has none).
    ///
    /// One process loads one libclang, named by its SHA-256 ([`Libclang::source`]): a second
    /// activation of the same bytes (from another cache folder, say) reuses the loaded library,
    /// and one of other bytes is refused with [`InputError::BadLibclangPath`]. That is what
    /// makes the one environment write below sound: clang-sys opens a library only where
    /// `LIBCLANG_PATH` points (its `SharedLibrary` cannot be built from a path), so the variable
    /// names this file for the one call that loads it and is put back right after, and that
    /// happens once per process, before any libclang code runs in it.
    pub fn activate(&self) -> Result<(), InputError> {
        type Loaded = Option<(String, PathBuf, Arc<clang_sys::SharedLibrary>)>;
        static LOADED: Mutex<Loaded> = Mutex::new(None);
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        let library = match &*loaded {
            Some((sha256, _, library)) if *sha256 == self.source.sha256 => library.clone(),
            Some((sha256, path, _)) => {
                return Err(InputError::BadLibclangPath {
                    path: self.library.clone(),
                    detail: format!(
                        "this process has loaded another libclang already ({}, sha256 {sha256}), \
                         and a process loads one; run this generation in a process of its own",
                        path.display()
                    ),
                });
            }
            None => {
                let name = "LIBCLANG_PATH";
                let before = std::env::var_os(name);
                // SAFETY: this runs only while no libclang is loaded in this process (under the
                // lock above; once one loads, `loaded` keeps it and no later call gets here), so
                // no libclang code runs meanwhile; Rust code on other threads reads the
                // environment under std's own lock, which `set_var` takes.
                unsafe { std::env::set_var(name, &self.library) };
                let opened = clang_sys::load_manually();
                // SAFETY: as above.
                unsafe {
                    match &before {
                        Some(value) => std::env::set_var(name, value),
                        None => std::env::remove_var(name),
                    }
                }
                let library = Arc::new(opened.map_err(|detail| InputError::BadLibclangPath {
                    path: self.library.clone(),
                    detail: format!("cannot be loaded: {detail}"),
                })?);
                *loaded = Some((
                    self.source.sha256.clone(),
                    self.library.clone(),
                    library.clone(),
                ));
                library
            }
        };
        clang_sys::set_library(Some(library));
        Ok(())
    }
}

/// `-isystem <dir>` with `dir` from `gcc -print-file-name=include`: gcc's own `<stddef.h>`,
/// `<stdarg.h>` and friends, which the pinned libclang does not ship.
pub(crate) fn gcc_include_args() -> Result<Vec<String>, InputError> {
    let missing = |detail: String| InputError::GccMissing { detail };
    let output = Command::new("gcc")
        .arg("-print-file-name=include")
        .output()
        .map_err(|e| missing(format!("could not run gcc: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(missing(last.map_or_else(
            || format!("gcc exited with {}", output.status),
            str::to_owned,
        )));
    }
    let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let dir = Path::new(&printed);
    if !dir.is_absolute() || !dir.join("stddef.h").is_file() {
        return Err(missing(format!(
            "it printed '{printed}', not a folder holding stddef.h"
        )));
    }
    Ok(vec!["-isystem".to_owned(), printed])
}

/// Whether clang-sys (with its `runtime` feature, on Linux) takes `name` for a libclang:
/// `libclang.so`, `libclang-*.so`, `libclang.so.*` or `libclang-*.so.*`, but not `libclang-cpp`.
fn is_library_name(name: &str) -> bool {
    let matches = name == "libclang.so"
        || name.starts_with("libclang.so.")
        || (name.starts_with("libclang-") && (name.ends_with(".so") || name.contains(".so.")));
    matches && !name.contains("-cpp.")
}

/// The version clang-sys reads from a library's file name (its `parse_version`).
fn name_version(name: &str) -> Vec<u32> {
    let version = if let Some(v) = name.strip_prefix("libclang.so.") {
        v
    } else if name.starts_with("libclang-") && name.len() >= 12 {
        &name[9..name.len() - 3]
    } else {
        return Vec::new();
    };
    version.split('.').map(|s| s.parse().unwrap_or(0)).collect()
}

/// Whether the file at `path` is a 64-bit ELF file, as clang-sys requires; opened only if regular.
fn is_elf64(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 5];
    open_regular(path, "")
        .ok()
        .is_some_and(|mut f| f.read_exact(&mut header).is_ok())
        && header == [0x7f, b'E', b'L', b'F', 2]
}

/// The library clang-sys loads for `LIBCLANG_PATH=path`: the file itself when `path` names a
/// library, else among the libraries in the folder the one with the highest version in its name
/// (the first found on a tie, in clang-sys's order: pattern by pattern, names sorted).
fn library_for(path: &Path) -> Option<std::path::PathBuf> {
    let name_of = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_owned);
    if !path.is_dir() {
        return name_of(path)
            .filter(|n| is_library_name(n))
            .filter(|_| is_elf64(path))
            .map(|_| path.to_owned());
    }
    let mut names: Vec<String> = std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| is_library_name(n))
        .collect();
    names.sort();
    // clang-sys globs the four patterns in this order.
    let patterns: [fn(&str) -> bool; 4] = [
        |n| n == "libclang.so",
        |n| n.starts_with("libclang-") && n.ends_with(".so"),
        |n| n.starts_with("libclang.so."),
        |n| n.starts_with("libclang-") && n.contains(".so."),
    ];
    let mut found: Vec<&String> = Vec::new();
    for pattern in patterns {
        for name in names.iter().filter(|n| pattern(n)) {
            if !found.contains(&name) {
                found.push(name);
            }
        }
    }
    found
        .into_iter()
        .filter(|n| is_elf64(&path.join(n)))
        .rev()
        .max_by_key(|n| name_version(n))
        .map(|n| path.join(n))
}

/// The libclang at `path` (a folder holding a libclang, or the library itself), as given by
/// `LIBCLANG_PATH`. The library is the one clang-sys will load there (`libclang.so`,
/// `libclang-N.so`, `libclang.so.N`, `libclang-N.so.N`; 64-bit ELF), and provenance records
/// `override: <path>` and that file's SHA-256; a path holding none is an error, before bindgen
/// (which would panic) runs. The result carries a warning that output may differ from the
/// committed bindings. gcc's include folder is added to the clang arguments when gcc is there.
pub fn local_libclang(path: &Path) -> Result<Libclang, InputError> {
    let unset = "unset it to use the pinned libclang, or point it at a folder holding libclang.so";
    if path.to_str().is_none() {
        return Err(InputError::BadLibclangPath {
            path: path.to_owned(),
            detail: format!("is not valid UTF-8, which clang-sys cannot read; {unset}"),
        });
    }
    if !path.exists() {
        return Err(InputError::BadLibclangPath {
            path: path.to_owned(),
            detail: format!("names nothing; {unset}"),
        });
    }
    let Some(library) = library_for(path) else {
        return Err(InputError::BadLibclangPath {
            path: path.to_owned(),
            detail: format!(
                "holds no libclang that clang-sys can load (a 64-bit ELF libclang.so, libclang-N.so, libclang.so.N or libclang-N.so.N); {unset}"
            ),
        });
    };
    let sha256 = sha256_file(&library)?;
    Ok(Libclang {
        library: library.clone(),
        version: "unknown".to_owned(),
        clang_args: gcc_include_args().unwrap_or_default(),
        source: Provenance {
            name: "libclang".to_owned(),
            version: "unknown".to_owned(),
            file: format!("override: {}", library.display()),
            sha256,
        },
        warning: Some(format!(
            "LIBCLANG_PATH={} overrides the pinned libclang {LIBCLANG_VERSION}: the generated bindings may differ from the committed ones; unset LIBCLANG_PATH to use the pinned libclang",
            path.display()
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_as_clang_sys_reads_them() {
        for yes in [
            "libclang.so",
            "libclang-18.so",
            "libclang.so.18.1",
            "libclang-17.so.1",
        ] {
            assert!(is_library_name(yes), "{yes}");
        }
        for no in [
            "libclang-cpp.so.18",
            "libclang.a",
            "clang.so",
            "libclangx.so",
        ] {
            assert!(!is_library_name(no), "{no}");
        }
        assert_eq!(name_version("libclang.so.18.1"), vec![18, 1]);
        assert_eq!(name_version("libclang-14.so"), vec![14]);
        assert_eq!(name_version("libclang.so"), Vec::<u32>::new());
    }
}
