//! Where the CUDA libraries are looked for, and the loop that opens the first acceptable one,
//! recording why each other candidate was passed over.
//!
//! Only a regular file (or a symbolic link to one) is handed to `dlopen` when a path is given,
//! whether by an environment variable or by a searched folder: a FIFO would block the search
//! forever, and a device or folder cannot be a library. Such a path is listed as `is not a
//! regular file` in [`Error::LibraryNotFound`]. A bare name is passed to the system loader
//! unchanged.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use libloading::Library;

use super::{LIBCUDA_ENV, LIBCUDART_ENV};
use crate::error::Error;

/// One entry of a search: a file to try, or a place that could not be looked at.
#[derive(Debug)]
pub(super) enum Step {
    /// A file to open: a path, or a bare name for the system loader.
    Try {
        /// What to pass to `dlopen`.
        file: PathBuf,
        /// How the entry reads in an error message.
        label: String,
        /// Named by an environment variable: the only file tried.
        explicit: bool,
    },
    /// A place that was not searched, and why (e.g. `$CUDA_HOME: not set`).
    Skip(String),
}

/// The driver's search, in the order the module documentation gives.
pub(super) fn driver_steps() -> Vec<Step> {
    const FILE: &str = "libcuda.so.1";
    if let Some(path) = non_empty_var(LIBCUDA_ENV) {
        return vec![explicit(LIBCUDA_ENV, path)];
    }
    let mut steps = vec![system(FILE)];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        match non_empty_var(var) {
            Some(root) => {
                let root = PathBuf::from(root);
                for dir in ["lib64", "compat"] {
                    steps.push(file(root.join(dir).join(FILE)));
                }
            }
            None => steps.push(Step::Skip(format!("${var}: not set"))),
        }
    }
    dedup(steps)
}

/// The file name of the runtime of major version `major`.
pub(super) fn runtime_file(major: u32) -> &'static str {
    match major {
        12 => "libcudart.so.12",
        13 => "libcudart.so.13",
        _ => intern(format!("libcudart.so.{major}")),
    }
}

/// A `'static` copy of `name`, leaked at most once per distinct name (the error that carries
/// a library's name needs it for `'static`).
fn intern(name: String) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.iter().find(|known| **known == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.push(leaked);
    leaked
}

/// The runtime's search for major version `major`, in the order the module documentation gives.
pub(super) fn runtime_steps(major: u32) -> Vec<Step> {
    let name = runtime_file(major);
    // The per-major variable first, so that a program using both a 12.x and a 13.x target can
    // point each runtime at its own file.
    let per_major = format!("{LIBCUDART_ENV}_{major}");
    if let Some(path) = non_empty_var(&per_major) {
        return vec![explicit(&per_major, path)];
    }
    if let Some(path) = non_empty_var(LIBCUDART_ENV) {
        return vec![explicit(LIBCUDART_ENV, path)];
    }
    let mut steps = vec![system(name)];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        match non_empty_var(var) {
            Some(root) => {
                let root = PathBuf::from(root);
                for dir in ["lib64", "lib"] {
                    steps.push(file(root.join(dir).join(name)));
                }
            }
            None => steps.push(Step::Skip(format!("${var}: not set"))),
        }
    }
    let wheel = match major {
        12 => PathBuf::from("nvidia/cuda_runtime/lib").join(name),
        _ => PathBuf::from(format!("nvidia/cu{major}/lib")).join(name),
    };
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        match non_empty_var(var) {
            Some(prefix) => python_dirs(
                &PathBuf::from(prefix).join("lib"),
                "site-packages",
                &wheel,
                &mut steps,
            ),
            None => steps.push(Step::Skip(format!("${var}: not set"))),
        }
    }
    match non_empty_var("PYTHONPATH") {
        Some(paths) => {
            for dir in env::split_paths(&paths).filter(|d| !d.as_os_str().is_empty()) {
                steps.push(file(dir.join(&wheel)));
            }
        }
        None => steps.push(Step::Skip("$PYTHONPATH: not set".to_owned())),
    }
    match non_empty_var("HOME") {
        Some(home) => python_dirs(
            &PathBuf::from(home).join(".local/lib"),
            "site-packages",
            &wheel,
            &mut steps,
        ),
        None => steps.push(Step::Skip("$HOME: not set".to_owned())),
    }
    for leaf in ["site-packages", "dist-packages"] {
        python_dirs(Path::new("/usr/local/lib"), leaf, &wheel, &mut steps);
    }
    steps.push(file(
        Path::new("/usr/lib/python3/dist-packages").join(&wheel),
    ));
    dedup(steps)
}

/// Opens the first candidate that `accept` takes, or lists every step and why it failed.
///
/// `accept` gets the opened library and the name it was opened by, and returns the loaded
/// value or why the file is not acceptable (the library is then closed again).
pub(super) fn open_first<T>(
    library: &'static str,
    steps: Vec<Step>,
    mut accept: impl FnMut(Library, String) -> Result<T, String>,
) -> Result<T, Error> {
    let mut searched = Vec::with_capacity(steps.len());
    for step in steps {
        let (file, label, explicit) = match step {
            Step::Try {
                file,
                label,
                explicit,
            } => (file, label, explicit),
            Step::Skip(why) => {
                searched.push(why);
                continue;
            }
        };
        // A bare name is the system loader's to find; a path must be a regular file (or a link
        // to one), since `dlopen` would wait forever on a FIFO and read a device.
        let refused = if file.components().count() > 1 {
            not_openable(&file)
        } else {
            None
        };
        let why = match refused {
            Some(why) => why,
            // SAFETY: loading a CUDA library runs its initialisers, which expect nothing of the
            // caller; it is never unloaded while any of its functions may run.
            None => match unsafe { Library::new(&file) } {
                Ok(lib) => match accept(lib, file.display().to_string()) {
                    Ok(loaded) => return Ok(loaded),
                    Err(why) => why,
                },
                Err(e) => dl_error(&e),
            },
        };
        searched.push(format!("{label}: {why}"));
        if explicit {
            searched.push("no other place was searched, since the variable is set".to_owned());
            break;
        }
    }
    Err(Error::LibraryNotFound {
        library,
        searched: crate::error::intern_report(searched),
    })
}

/// Why the file at `path` must not be handed to `dlopen`, or `None` when it is a regular file
/// (links are followed).
fn not_openable(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => None,
        Ok(meta) => Some(format!(
            "is not a regular file ({})",
            kind(&meta.file_type())
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("no such file".to_owned()),
        Err(e) => Some(format!("cannot be examined: {e}")),
    }
}

/// What a file that is not a regular file is, for messages.
fn kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "neither a file nor a folder"
    }
}

/// A libloading error with the system's own reason (`dlerror`), which libloading keeps as its
/// source.
pub(super) fn dl_error(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

fn non_empty_var(name: &str) -> Option<OsString> {
    env::var_os(name).filter(|v| !v.is_empty())
}

fn explicit(var: &str, path: OsString) -> Step {
    let file = PathBuf::from(path);
    Step::Try {
        label: format!("${var}={}", file.display()),
        file,
        explicit: true,
    }
}

fn system(name: &str) -> Step {
    Step::Try {
        file: PathBuf::from(name),
        label: format!("{name} (system loader)"),
        explicit: false,
    }
}

fn file(path: PathBuf) -> Step {
    Step::Try {
        label: path.display().to_string(),
        file: path,
        explicit: false,
    }
}

/// Adds `lib/python3.*/leaf/wheel` for every `python3.*` folder in `lib`, in name order, or one
/// skip saying the pattern matched nothing.
fn python_dirs(lib: &Path, leaf: &str, wheel: &Path, steps: &mut Vec<Step>) {
    let mut found: Vec<PathBuf> = std::fs::read_dir(lib)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("python3."))
        })
        .map(|entry| entry.path().join(leaf))
        .filter(|site| site.is_dir())
        .collect();
    found.sort();
    if found.is_empty() {
        let pattern = lib.join("python3.*").join(leaf).join(wheel);
        steps.push(Step::Skip(format!("{}: no such folder", pattern.display())));
    }
    steps.extend(found.into_iter().map(|site| file(site.join(wheel))));
}

/// Drops files already tried earlier (`$CUDA_HOME` and `$CUDA_PATH` are often the same).
///
/// A linear scan, not a `HashSet`: a search has a handful of steps, and a `HashSet`'s random
/// keys cost a `getrandom` system call on the first call of a process, which is what the
/// library search is part of.
fn dedup(steps: Vec<Step>) -> Vec<Step> {
    let mut kept: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        let repeated = match &step {
            Step::Try { file, .. } => kept
                .iter()
                .any(|k| matches!(k, Step::Try { file: seen, .. } if seen == file)),
            Step::Skip(_) => false,
        };
        if !repeated {
            kept.push(step);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_the_first_of_equal_files() {
        let steps = dedup(vec![
            file(PathBuf::from("/a/lib64/libcuda.so.1")),
            Step::Skip("x".to_owned()),
            file(PathBuf::from("/a/lib64/libcuda.so.1")),
            file(PathBuf::from("/a/compat/libcuda.so.1")),
        ]);
        assert_eq!(steps.len(), 3);
    }

    #[test]
    fn runtime_file_names_follow_the_major() {
        assert_eq!(runtime_file(12), "libcudart.so.12");
        assert_eq!(runtime_file(13), "libcudart.so.13");
        assert_eq!(runtime_file(14), "libcudart.so.14");
        assert!(std::ptr::eq(runtime_file(14), runtime_file(14)));
    }

    #[test]
    fn a_missing_folder_is_named_with_its_pattern() {
        let mut steps = Vec::new();
        python_dirs(
            Path::new("/nonexistent/lib"),
            "site-packages",
            Path::new("nvidia/cu13/lib/libcudart.so.13"),
            &mut steps,
        );
        match steps.as_slice() {
            [Step::Skip(why)] => assert_eq!(
                why,
                "/nonexistent/lib/python3.*/site-packages/nvidia/cu13/lib/libcudart.so.13: no such folder"
            ),
            other => panic!("unexpected steps: {other:?}"),
        }
    }
}
