//! Checking a set of CUDA include folders (pinned or local): the headers generation reads are
//! there, `crt/` is reachable, and `cuda.h` is of the target's version.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::error::InputError;
use super::files::{kind, read_regular, sha256_file};
use super::lock::Provenance;
use crate::target::Ctk;

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
    /// The temporary folder the pinned headers were unpacked into, deleted when the last clone
    /// of this value goes; `None` for a local toolkit.
    pub(crate) folder: Option<Arc<tempfile::TempDir>>,
}

/// The headers generation reads directly, and the one they include that lives in another package.
const CUDA_H: &str = "cuda.h";
const RUNTIME_API_H: &str = "cuda_runtime_api.h";
const TYPEDEFS_H: &str = "cudaTypedefs.h";
const CRT_HOST_DEFINES_H: &str = "crt/host_defines.h";

/// Where a set of headers came from, for messages.
pub(crate) enum Origin<'a> {
    /// The pinned packages, named `name==version, ...`.
    Pinned(String),
    /// `--cuda-home DIR`.
    CudaHome(&'a Path),
}

impl Origin<'_> {
    fn what(&self) -> String {
        match self {
            Origin::Pinned(specs) => format!("the pinned headers ({specs})"),
            Origin::CudaHome(dir) => format!("--cuda-home {}", dir.display()),
        }
    }

    fn missing_hint(&self) -> String {
        match self {
            Origin::Pinned(_) => "the pinned wheels do not hold what generator/src/inputs.rs expects; fix the pins there".to_owned(),
            Origin::CudaHome(_) => "point --cuda-home at a complete CUDA toolkit, or drop --cuda-home to use the pinned packages".to_owned(),
        }
    }

    fn irregular_hint(&self) -> String {
        match self {
            Origin::Pinned(_) => "it was unpacked from the hash-checked wheel into a temporary folder of this run and replaced since; run again".to_owned(),
            Origin::CudaHome(_) => "the generator reads only regular files (a FIFO would block clang); point --cuda-home at a toolkit whose headers are files".to_owned(),
        }
    }

    fn version_hint(&self, ctk: Ctk) -> String {
        match self {
            Origin::Pinned(_) => format!(
                "the pins for {ctk} in generator/src/inputs.rs name packages of another version; fix them"
            ),
            Origin::CudaHome(_) => format!(
                "point --cuda-home at a CUDA {ctk} toolkit, or drop --cuda-home to use the pinned packages"
            ),
        }
    }
}

/// `12040` → `"12.4"`.
pub(crate) fn version_text(cuda_version: u32) -> String {
    format!("{}.{}", cuda_version / 1000, cuda_version % 1000 / 10)
}

/// The `CUDA_VERSION` that the `cuda.h` at `path` defines.
pub(crate) fn cuda_version(path: &Path) -> Result<u32, InputError> {
    static DEFINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?m)^[ \t]*#[ \t]*define[ \t]+CUDA_VERSION[ \t]+([0-9]+)\b").unwrap()
    });
    let bytes = read_regular(path, "point at a cuda.h that is a regular file")?;
    let text = String::from_utf8_lossy(&bytes);
    DEFINE
        .captures(&text)
        .and_then(|c| c[1].parse().ok())
        .ok_or_else(|| InputError::NoCudaVersion {
            path: path.to_owned(),
        })
}

/// Checks the include folders `dirs` for target `ctk`; `source` is left empty for the caller.
pub(crate) fn check(
    ctk: Ctk,
    dirs: Vec<PathBuf>,
    origin: &Origin<'_>,
) -> Result<Headers, InputError> {
    let find = |header: &str| {
        let found = dirs
            .iter()
            .map(|d| d.join(header))
            .find(|p| std::fs::symlink_metadata(p).is_ok());
        if let Some(path) = &found {
            // Followed through links; a FIFO or folder is refused before anything opens it.
            let meta = std::fs::metadata(path).map_err(InputError::io(path))?;
            if !meta.is_file() {
                return Err(InputError::NotRegular {
                    path: path.clone(),
                    kind: kind(meta.file_type()),
                    hint: origin.irregular_hint(),
                });
            }
        }
        found.ok_or_else(|| InputError::MissingHeader {
            header: header.to_owned(),
            dirs: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            hint: origin.missing_hint(),
        })
    };
    let cuda_h = find(CUDA_H)?;
    let runtime_api_h = find(RUNTIME_API_H)?;
    let typedefs_h = find(TYPEDEFS_H)?;
    find(CRT_HOST_DEFINES_H)?;
    let found = cuda_version(&cuda_h)?;
    if found != ctk.cuda_version() {
        return Err(InputError::VersionMismatch {
            what: origin.what(),
            found: version_text(found),
            found_raw: found,
            ctk,
            hint: origin.version_hint(ctk),
        });
    }
    Ok(Headers {
        ctk,
        include_dirs: dirs,
        cuda_h,
        runtime_api_h,
        typedefs_h,
        cuda_version: found,
        source: Vec::new(),
        folder: None,
    })
}

/// The headers of the local CUDA toolkit at `cuda_home` (its `include/`), checked for target
/// `ctk`. Provenance records the path and SHA-256 of `cuda.h`, `cuda_runtime_api.h` and
/// `cudaTypedefs.h`.
pub fn local_headers(ctk: Ctk, cuda_home: &Path) -> Result<Headers, InputError> {
    let include = cuda_home.join("include");
    if std::fs::symlink_metadata(include.join(CUDA_H)).is_err() {
        return Err(InputError::NoCudaH {
            cuda_home: cuda_home.to_owned(),
        });
    }
    let origin = Origin::CudaHome(cuda_home);
    let mut headers = check(ctk, vec![include.clone()], &origin)?;
    // clang opens whatever the headers include: refuse a FIFO or device anywhere in include/.
    if let Some((path, file_type)) = special_file(&include)? {
        return Err(InputError::NotRegular {
            path,
            kind: kind(file_type),
            hint: origin.irregular_hint(),
        });
    }
    let version = version_text(headers.cuda_version);
    for path in [&headers.cuda_h, &headers.runtime_api_h, &headers.typedefs_h] {
        headers.source.push(Provenance {
            name: "cuda-home".to_owned(),
            version: version.clone(),
            file: path.display().to_string(),
            sha256: sha256_file(path)?,
        });
    }
    Ok(headers)
}

/// The first entry under `dir` (recursively, through real folders; a link is followed to see what
/// it names, not walked into) that is neither a folder nor a regular file, such as a FIFO.
fn special_file(dir: &Path) -> Result<Option<(PathBuf, std::fs::FileType)>, InputError> {
    let mut entries = std::fs::read_dir(dir)
        .and_then(|e| e.collect::<std::io::Result<Vec<_>>>())
        .map_err(InputError::io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let mut file_type = entry.file_type().map_err(InputError::io(&path))?;
        if file_type.is_symlink() {
            match std::fs::metadata(&path) {
                Ok(meta) => file_type = meta.file_type(),
                // A dangling link: clang finds nothing there, as if it were absent.
                Err(_) => continue,
            }
            if file_type.is_dir() {
                continue;
            }
        } else if file_type.is_dir() {
            if let Some(found) = special_file(&path)? {
                return Ok(Some(found));
            }
            continue;
        }
        if !file_type.is_file() {
            return Ok(Some((path, file_type)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_text_of_known_versions() {
        assert_eq!(version_text(12040), "12.4");
        assert_eq!(version_text(12090), "12.9");
        assert_eq!(version_text(13000), "13.0");
        assert_eq!(version_text(13050), "13.5");
    }

    #[test]
    fn reads_the_define_not_a_mention() {
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path().join("cuda.h");
        std::fs::write(
            &h,
            "/* CUDA_VERSION 99999 */\n#ifndef X\n#  define  CUDA_VERSION 13050\n#endif\n",
        )
        .unwrap();
        assert_eq!(cuda_version(&h).unwrap(), 13050);
        std::fs::write(&h, "// #define CUDA_VERSION 1\n").unwrap();
        let err = cuda_version(&h).unwrap_err().to_string();
        assert!(err.contains("has no `#define CUDA_VERSION <n>`"), "{err}");
    }
}
