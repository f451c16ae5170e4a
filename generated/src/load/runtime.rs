//! The runtime libraries, one per major version: loading them, resolving their functions by
//! `dlsym`, and naming their error codes.

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use libloading::Library;

use super::{Addr, function, search};
use crate::error::{Api, Error, Version};

const CUDA_SUCCESS: u32 = 0;

/// `cudaRuntimeGetVersion(int *runtimeVersion)`.
type RuntimeGetVersion = unsafe extern "C" fn(*mut c_int) -> u32;
/// `cudaGetErrorName` and `cudaGetErrorString`: `const char *(cudaError_t error)`.
type GetErrorText = unsafe extern "C" fn(u32) -> *const c_char;

/// One loaded runtime.
#[derive(Debug)]
pub(super) struct Runtime {
    /// Kept open for the life of the process.
    lib: Library,
    /// The file as it was opened, for messages.
    library: String,
    major: u32,
    /// From `cudaRuntimeGetVersion`, e.g. 13000.
    version: u32,
    error_name: Option<GetErrorText>,
    error_string: Option<GetErrorText>,
}

/// Every runtime loaded so far, at most one per major version; the lock also serialises
/// searches. Entries are leaked on purpose: a runtime is never unloaded.
static RUNTIMES: Mutex<Vec<&'static Runtime>> = Mutex::new(Vec::new());

impl Runtime {
    /// The runtime of major version `major`, loaded by the first call that succeeds.
    pub(super) fn get(major: u32) -> Result<&'static Runtime, Error> {
        let mut runtimes = RUNTIMES.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(rt) = runtimes.iter().find(|rt| rt.major == major) {
            return Ok(rt);
        }
        let rt = search::open_first(
            search::runtime_file(major),
            search::runtime_steps(major),
            |lib, library| Runtime::accept(lib, library, major),
        )?;
        let rt: &'static Runtime = Box::leak(Box::new(rt));
        runtimes.push(rt);
        Ok(rt)
    }

    /// The runtime of major version `major` if it is already loaded.
    fn loaded(major: u32) -> Option<&'static Runtime> {
        let runtimes = RUNTIMES.lock().unwrap_or_else(PoisonError::into_inner);
        runtimes.iter().find(|rt| rt.major == major).copied()
    }

    fn accept(lib: Library, library: String, major: u32) -> Result<Runtime, String> {
        // SAFETY: each type below is the C declaration of the function it is looked up for.
        let (get_version, error_name, error_string) = unsafe {
            (
                function::<RuntimeGetVersion>(&lib, c"cudaRuntimeGetVersion"),
                function::<GetErrorText>(&lib, c"cudaGetErrorName"),
                function::<GetErrorText>(&lib, c"cudaGetErrorString"),
            )
        };
        let Some(get_version) = get_version else {
            return Err("exports no cudaRuntimeGetVersion: not a CUDA runtime".to_owned());
        };
        let mut version: c_int = 0;
        // SAFETY: `version` is valid for writes; the call needs no GPU.
        let code = unsafe { get_version(&mut version) };
        if code != CUDA_SUCCESS {
            return Err(format!("its cudaRuntimeGetVersion failed with code {code}"));
        }
        let version = u32::try_from(version).unwrap_or(0);
        if version / 1000 != major {
            return Err(format!(
                "it is the CUDA {} runtime, not a CUDA {major}.x one",
                Version(version)
            ));
        }
        Ok(Runtime {
            lib,
            library,
            major,
            version,
            error_name,
            error_string,
        })
    }

    /// Resolves `symbol` by `dlsym`.
    pub(super) fn symbol(
        &'static self,
        name: &'static str,
        symbol: &CStr,
        needs: u32,
    ) -> Result<Addr, Error> {
        // SAFETY: only the address is taken; the caller gives it its C type.
        let found = unsafe { self.lib.get::<*mut c_void>(symbol) };
        found
            .ok()
            .and_then(|address| NonNull::new(*address))
            .map(Addr)
            .ok_or_else(|| Error::Unavailable {
                api: Api::Runtime { major: self.major },
                function: name,
                needs,
                found: Some(self.version),
                library: &self.library,
            })
    }
}

/// Asks the runtime for a code's name or description: a static string of the loaded runtime.
fn describe(get: Option<GetErrorText>, code: u32) -> Option<&'static str> {
    // SAFETY: the function takes any code and returns NULL or a static C string.
    let text = unsafe { get?(code) };
    if text.is_null() {
        return None;
    }
    // SAFETY: checked non-NULL above; the runtime's strings are NUL-terminated and live as long
    // as the runtime, which is never unloaded.
    unsafe { CStr::from_ptr(text) }.to_str().ok()
}

/// The name of `code` from the major-`major` runtime's `cudaGetErrorName`, if it is loaded.
pub(super) fn error_name(major: u32, code: u32) -> Option<&'static str> {
    describe(Runtime::loaded(major)?.error_name, code)
}

/// The description of `code` from the major-`major` runtime's `cudaGetErrorString`, or why
/// there is none.
pub(super) fn error_description(major: u32, code: u32) -> Cow<'static, str> {
    match Runtime::loaded(major) {
        Some(rt) => match describe(rt.error_string, code) {
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(format!("{} gave no description of this code", rt.library)),
        },
        None => Cow::Owned(format!(
            "no description, since {} is not loaded",
            search::runtime_file(major)
        )),
    }
}

/// Maps a call's `cudaError_t` in the runtime of major version `major` to `Ok(())` or
/// [`Error::Cuda`] naming `function`. The error is three stores; the code's name and
/// description are looked up in that runtime (`cudaGetErrorName`, `cudaGetErrorString`) when
/// it is displayed. [`UNRESOLVED`](super::UNRESOLVED), from a first call that could not
/// resolve its function, becomes the error that call left ([`Error::Unavailable`], ..).
#[inline(always)]
pub fn runtime_result(function: &'static str, major: u32, code: u32) -> Result<(), Error> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else if code == super::UNRESOLVED {
        Err(*super::first::unresolved_error(
            Api::Runtime { major },
            function,
            code,
        ))
    } else {
        Err(Error::Cuda {
            api: Api::Runtime { major },
            function,
            code,
        })
    }
}

/// The version of the CUDA runtime of major version `major`, from its `cudaRuntimeGetVersion`
/// (e.g. `13000` for 13.0); loads that runtime if needed. Needs no GPU.
pub fn runtime_version(major: u32) -> Result<u32, Error> {
    Runtime::get(major).map(|rt| rt.version)
}
