//! The libclang bindgen loads: a `LIBCLANG_PATH` override, and the clang arguments that stand in
//! for the resource headers the pinned libclang lacks.

use std::path::Path;
use std::process::Command;

use super::{InputError, Libclang, Provenance, sha256_file};

/// The version of the pinned libclang wheel.
pub const LIBCLANG_VERSION: &str = "18.1.1";

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

/// The libclang at `path` (a folder holding `libclang.so`, or the library itself), as given by
/// `LIBCLANG_PATH`. The result carries a warning that output may differ from the committed
/// bindings; provenance records `override: <path>` and the library's SHA-256 when it is found.
/// gcc's include folder is added to the clang arguments when gcc is there.
pub fn local_libclang(path: &Path) -> Result<Libclang, InputError> {
    if !path.exists() {
        return Err(InputError::Io {
            path: path.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "LIBCLANG_PATH names nothing; unset it to use the pinned libclang, or point it at a folder holding libclang.so",
            ),
        });
    }
    let library = if path.is_file() {
        Some(path.to_owned())
    } else {
        Some(path.join("libclang.so")).filter(|p| p.is_file())
    };
    let sha256 = match library {
        Some(lib) => sha256_file(&lib)?,
        None => "unknown".to_owned(),
    };
    Ok(Libclang {
        dir: path.to_owned(),
        version: "unknown".to_owned(),
        clang_args: gcc_include_args().unwrap_or_default(),
        source: Provenance {
            name: "libclang".to_owned(),
            version: "unknown".to_owned(),
            file: format!("override: {}", path.display()),
            sha256,
        },
        warning: Some(format!(
            "LIBCLANG_PATH={} overrides the pinned libclang {LIBCLANG_VERSION}: the generated bindings may differ from the committed ones; unset LIBCLANG_PATH to use the pinned libclang",
            path.display()
        )),
    })
}
