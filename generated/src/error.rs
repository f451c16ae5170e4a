//! The one error type of every target: a failed CUDA call, a function the installed CUDA lacks,
//! a library that could not be loaded, or a default-stream mode that can no longer change.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use crate::load::DefaultStream;

/// Which CUDA API a function belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// The driver API (`libcuda.so.1`, `cu*` functions).
    Driver,
    /// The runtime API of one major CUDA version (`libcudart.so.<major>`, `cuda*` functions).
    Runtime {
        /// The runtime's major version: 12 or 13.
        major: u32,
    },
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Api::Driver => f.write_str("driver"),
            Api::Runtime { major } => write!(f, "CUDA {major} runtime"),
        }
    }
}

/// A CUDA version number as CUDA encodes it (`1000 * major + 10 * minor`), shown as `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version(pub(crate) u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0 / 1000, self.0 % 1000 / 10)
    }
}

/// What went wrong in a call through this crate.
///
/// Making one is cheap: a failed CUDA call ([`Error::Cuda`]) holds only the API, the function's
/// name and the code, so a polling loop that sees `CUDA_ERROR_NOT_READY` pays a few stores. The
/// code's name and description are looked up in the loaded library when the error is displayed
/// (or asked with [`Error::name`] and [`Error::description`]).
///
/// Every field is `'static` or plain data, so an `Error` is `Copy`: it has nothing to free, and
/// the entry points can hand out a remembered one without cloning. The few texts an error
/// carries are kept for the life of the process: a library's file name lives as long as the
/// library (never unloaded), and a failed search's report is kept once per distinct report.
///
/// ```
/// static SEARCHED: [String; 1] = [String::new()];
/// let error = cuda_hostcb::Error::LibraryNotFound {
///     library: "libcuda.so.1",
///     searched: &SEARCHED,
/// };
/// assert!(error.to_string().starts_with("could not load libcuda.so.1; searched: "));
/// assert_eq!(error.code(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA function returned an error code. Displayed with the code's name and description,
    /// from `cuGetErrorName`/`cuGetErrorString` or `cudaGetErrorName`/`cudaGetErrorString`.
    Cuda {
        /// The API the function belongs to.
        api: Api,
        /// The function that failed, e.g. `cuLaunchHostFunc`.
        function: &'static str,
        /// The `CUresult` or `cudaError_t` value.
        code: u32,
    },

    /// The installed driver or runtime does not provide the function (or not its ABI version).
    Unavailable {
        /// The API the function belongs to.
        api: Api,
        /// The function, e.g. `cuLaunchHostFunc_v2`.
        function: &'static str,
        /// The CUDA version the function first appeared in, e.g. 13010.
        needs: u32,
        /// The installed driver's or runtime's version, if it could be asked.
        found: Option<u32>,
        /// The library the function was looked up in, as it was opened.
        library: &'static str,
    },

    /// No usable copy of a CUDA library was found.
    LibraryNotFound {
        /// The library, e.g. `libcuda.so.1` or `libcudart.so.13`.
        library: &'static str,
        /// Each candidate in search order, with why it was not used.
        searched: &'static [String],
    },

    /// [`set_default_stream`](crate::load::set_default_stream) was called after a function was
    /// resolved with the other mode.
    StreamModeLocked {
        /// The mode in force.
        current: DefaultStream,
    },
}

// Written out rather than derived, so that the crate users build pulls in no proc-macro stack.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cuda {
                api,
                function,
                code,
            } => write!(
                f,
                "{function} failed with {} ({code}): {}",
                crate::load::error_name(*api, *code),
                crate::load::error_description(*api, *code)
            ),
            Error::Unavailable {
                api,
                function,
                needs,
                found,
                library,
            } => write!(
                f,
                "{function} is not available: {}",
                unavailable_reason(*api, *needs, *found, library)
            ),
            Error::LibraryNotFound { library, searched } => write!(
                f,
                "could not load {library}; searched: {}; {}",
                searched.join("; "),
                library_hint(library)
            ),
            Error::StreamModeLocked { current } => write!(
                f,
                "the default stream can no longer change: CUDA functions were already resolved \
                 with the {current} default stream; call set_default_stream before the first \
                 CUDA call, or set CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM=1 for the per-thread one"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// A status type of the bindings, which names a CUDA error: every target's `CUresult` (driver
/// API) and `cudaError_t` (runtime API). Implemented by the generated files only.
pub trait Code: Copy + crate::load::StatusSealed {
    /// The API whose functions return it.
    const API: Api;
    /// Its value.
    fn value(self) -> u32;
}

impl Error {
    /// Whether this is a [`Error::Cuda`] of `code`'s API (for the runtime, of its major
    /// version) with `code`'s value: a failure told apart by the status's name, as C compares
    /// it, `err.is(CUresult::CUDA_ERROR_NOT_READY)` or
    /// `err.is(cudaError_t::cudaErrorGraphExecUpdateFailure)`, with the status type of any
    /// target. Any other error is none of them.
    pub fn is<C: Code>(&self, code: C) -> bool {
        matches!(self, Error::Cuda { api, code: value, .. } if *api == C::API && *value == code.value())
    }

    /// The `CUresult` or `cudaError_t` value of a [`Error::Cuda`], `None` for every other error.
    pub fn code(&self) -> Option<u32> {
        match self {
            Error::Cuda { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The name of a [`Error::Cuda`]'s code (e.g. `CUDA_ERROR_NOT_READY`), from the loaded
    /// library (`cuGetErrorName` or `cudaGetErrorName`), or a phrase saying it is unknown;
    /// `None` for every other error.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Error::Cuda { api, code, .. } => Some(crate::load::error_name(*api, *code)),
            _ => None,
        }
    }

    /// The description of a [`Error::Cuda`]'s code (e.g. `device not ready`), from the loaded
    /// library (`cuGetErrorString` or `cudaGetErrorString`), or why there is none; `None` for
    /// every other error.
    pub fn description(&self) -> Option<Cow<'static, str>> {
        match self {
            Error::Cuda { api, code, .. } => Some(crate::load::error_description(*api, *code)),
            _ => None,
        }
    }

    /// Whether the installed CUDA lacks the function ([`Error::Unavailable`]): a caller can then
    /// fall back to an older API.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }
}

/// A `'static` copy of `error`, made once per distinct error and kept for the life of the
/// process: what an entry point hands out for a failed resolution (a reference is returned in
/// registers, so the fast path of every wrapper needs no stack frame for it). A program sees few
/// distinct errors (one library search report per environment), so this stays small.
pub(crate) fn intern(error: Error) -> &'static Error {
    static KEPT: Mutex<Vec<&'static Error>> = Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = kept.iter().find(|known| ***known == error) {
        return known;
    }
    let leaked: &'static Error = Box::leak(Box::new(error));
    kept.push(leaked);
    leaked
}

/// A `'static` copy of a search report, made once per distinct report (see [`intern`]).
pub(crate) fn intern_report(report: Vec<String>) -> &'static [String] {
    static KEPT: Mutex<Vec<&'static [String]>> = Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = kept.iter().find(|known| **known == report.as_slice()) {
        return known;
    }
    let leaked: &'static [String] = Vec::leak(report);
    kept.push(leaked);
    leaked
}

fn unavailable_reason(api: Api, needs: u32, found: Option<u32>, library: &str) -> String {
    let hint = match api {
        Api::Driver => format!(
            "install an NVIDIA driver for CUDA {} or newer",
            Version(needs)
        ),
        Api::Runtime { major } => format!(
            "install a CUDA {major} runtime of version {} or newer, or set \
             CUDA_HOSTCB_LIBCUDART_{major} to its path",
            Version(needs)
        ),
    };
    match found {
        Some(found) if found >= needs => format!(
            "the installed {api} ({library}) is CUDA {} and does not provide it, though it \
             appeared in CUDA {}; it may have been removed, so use the API that replaces it",
            Version(found),
            Version(needs)
        ),
        Some(found) => format!(
            "it needs CUDA {}, the installed {api} ({library}) is CUDA {}; {hint}",
            Version(needs),
            Version(found)
        ),
        None => format!(
            "it needs CUDA {}, the installed {api} ({library}) is of unknown version; {hint}",
            Version(needs)
        ),
    }
}

fn library_hint(library: &str) -> String {
    match library.strip_prefix("libcudart.so.") {
        Some(major) => {
            let wheel = if major == "12" {
                "nvidia-cuda-runtime-cu12"
            } else {
                "nvidia-cuda-runtime"
            };
            format!(
                "install a CUDA {major} runtime (the CUDA toolkit, or pip's {wheel}), or set \
                 CUDA_HOSTCB_LIBCUDART_{major} to the library's path"
            )
        }
        None => "install the NVIDIA driver, or set CUDA_HOSTCB_LIBCUDA to the path of its \
                 libcuda.so.1"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_major_dot_minor() {
        assert_eq!(Version(13010).to_string(), "13.1");
        assert_eq!(Version(12090).to_string(), "12.9");
        assert_eq!(Version(13000).to_string(), "13.0");
        assert_eq!(Version(10000).to_string(), "10.0");
    }

    #[test]
    fn unavailable_names_the_function_both_versions_and_the_library() {
        let e = Error::Unavailable {
            api: Api::Driver,
            function: "cuLaunchHostFunc_v2",
            needs: 13010,
            found: Some(13000),
            library: "libcuda.so.1",
        };
        assert_eq!(
            e.to_string(),
            "cuLaunchHostFunc_v2 is not available: it needs CUDA 13.1, the installed driver \
             (libcuda.so.1) is CUDA 13.0; install an NVIDIA driver for CUDA 13.1 or newer"
        );
        assert!(e.is_unavailable());
        assert_eq!(e.code(), None);
    }

    #[test]
    fn unavailable_in_a_new_enough_library_says_it_was_removed() {
        let e = Error::Unavailable {
            api: Api::Runtime { major: 13 },
            function: "cudaGone",
            needs: 12000,
            found: Some(13000),
            library: "/x/libcudart.so.13",
        };
        assert_eq!(
            e.to_string(),
            "cudaGone is not available: the installed CUDA 13 runtime (/x/libcudart.so.13) is \
             CUDA 13.0 and does not provide it, though it appeared in CUDA 12.0; it may have been \
             removed, so use the API that replaces it"
        );
    }

    #[test]
    fn cuda_errors_carry_their_code_and_name_it_when_displayed() {
        // No CUDA 91 runtime is ever loaded, so the display says why it has no name.
        let e = Error::Cuda {
            api: Api::Runtime { major: 91 },
            function: "cudaLaunchHostFunc",
            code: 1,
        };
        assert_eq!(
            e.to_string(),
            "cudaLaunchHostFunc failed with an unknown cudaError_t (1): no description, since \
             libcudart.so.91 is not loaded"
        );
        assert_eq!(e.code(), Some(1));
        assert_eq!(e.name(), Some("an unknown cudaError_t"));
        assert!(!e.is_unavailable());
    }

    #[test]
    fn reports_and_errors_are_kept_once() {
        let a = intern_report(vec!["x: no such file".to_owned()]);
        let b = intern_report(vec!["x: no such file".to_owned()]);
        assert!(std::ptr::eq(a, b));
        let e = Error::LibraryNotFound {
            library: "libcuda.so.1",
            searched: a,
        };
        assert!(std::ptr::eq(intern(e), intern(e)));
        assert_eq!(*intern(e), e);
    }

    #[test]
    fn a_cuda_error_is_small() {
        // What a failing call returns (through `Result<(), Error>`), built by a few stores.
        assert!(
            std::mem::size_of::<Error>() <= 64,
            "{}",
            std::mem::size_of::<Error>()
        );
    }

    #[test]
    fn library_not_found_lists_the_search_and_the_variable() {
        let e = Error::LibraryNotFound {
            library: "libcudart.so.12",
            searched: intern_report(vec!["a: no such file".to_owned(), "b: not set".to_owned()]),
        };
        let text = e.to_string();
        assert!(text.starts_with(
            "could not load libcudart.so.12; searched: a: no such file; b: not set; "
        ));
        assert!(
            text.ends_with(
                "install a CUDA 12 runtime (the CUDA toolkit, or pip's nvidia-cuda-runtime-cu12), \
                 or set CUDA_HOSTCB_LIBCUDART_12 to the library's path"
            ),
            "{text}"
        );
    }
}
