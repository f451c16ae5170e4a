//! The driver library: loading it, resolving functions through `cuGetProcAddress`, and naming
//! its error codes.

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, OnceLock, PoisonError};

use libloading::Library;

use super::{Addr, function, search};
use crate::error::{Api, Error};

/// The driver's file name, as loaded through the system loader.
const LIBRARY: &str = "libcuda.so.1";

// CUresult values this module acts on.
const CUDA_SUCCESS: u32 = 0;
const CUDA_ERROR_INVALID_VALUE: u32 = 1;
const CUDA_ERROR_NOT_FOUND: u32 = 500;

// CUdriverProcAddress_flags.
const CU_GET_PROC_ADDRESS_LEGACY_STREAM: u64 = 1;
const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 2;

// CUdriverProcAddressQueryResult.
const CU_GET_PROC_ADDRESS_SUCCESS: c_int = 0;

/// `cuGetProcAddress_v2` (CUDA 12.0): symbol, pfn, cudaVersion, flags, symbolStatus.
type GetProcAddressV2 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> u32;
/// `cuGetProcAddress` (CUDA 11.3): symbol, pfn, cudaVersion, flags.
type GetProcAddress = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> u32;
/// `cuDriverGetVersion(int *driverVersion)`.
type DriverGetVersion = unsafe extern "C" fn(*mut c_int) -> u32;
/// `cuGetErrorName` and `cuGetErrorString`: `(CUresult error, const char **pStr)`.
type GetErrorText = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;

#[derive(Debug, Clone, Copy)]
enum ProcAddress {
    V2(GetProcAddressV2),
    V1(GetProcAddress),
}

/// The loaded driver and the few functions resolved by plain `dlsym` (stable since CUDA 6).
#[derive(Debug)]
pub(super) struct Driver {
    /// Kept open for the life of the process.
    _lib: Library,
    /// The file as it was opened, for messages.
    library: String,
    proc_address: ProcAddress,
    get_version: Option<DriverGetVersion>,
    error_name: Option<GetErrorText>,
    error_string: Option<GetErrorText>,
}

static DRIVER: OnceLock<Driver> = OnceLock::new();
/// Serialises searches, so concurrent first calls open the library once.
static SEARCH: Mutex<()> = Mutex::new(());

impl Driver {
    /// The driver, loaded by the first call that succeeds.
    pub(super) fn get() -> Result<&'static Driver, Error> {
        if let Some(driver) = DRIVER.get() {
            return Ok(driver);
        }
        let _search = SEARCH.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(driver) = DRIVER.get() {
            return Ok(driver);
        }
        let driver = search::open_first(LIBRARY, search::driver_steps(), Driver::accept)?;
        Ok(DRIVER.get_or_init(|| driver))
    }

    fn accept(lib: Library, library: String) -> Result<Driver, String> {
        // SAFETY: each type below is the C declaration of the function it is looked up for.
        let (proc_address, get_version, error_name, error_string) = unsafe {
            let proc_address = match function::<GetProcAddressV2>(&lib, c"cuGetProcAddress_v2") {
                Some(f) => ProcAddress::V2(f),
                None => match function::<GetProcAddress>(&lib, c"cuGetProcAddress") {
                    Some(f) => ProcAddress::V1(f),
                    None => {
                        return Err("exports no cuGetProcAddress: the driver is older than \
                                    CUDA 11.3, or the file is not libcuda"
                            .to_owned());
                    }
                },
            };
            (
                proc_address,
                function::<DriverGetVersion>(&lib, c"cuDriverGetVersion"),
                function::<GetErrorText>(&lib, c"cuGetErrorName"),
                function::<GetErrorText>(&lib, c"cuGetErrorString"),
            )
        };
        Ok(Driver {
            _lib: lib,
            library,
            proc_address,
            get_version,
            error_name,
            error_string,
        })
    }

    /// Resolves `base` at ABI `version` through `cuGetProcAddress`.
    pub(super) fn proc_address(
        &'static self,
        name: &'static str,
        base: &CStr,
        version: u32,
        per_thread: bool,
    ) -> Result<Addr, Error> {
        let flags = if per_thread {
            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
        } else {
            CU_GET_PROC_ADDRESS_LEGACY_STREAM
        };
        let Ok(requested) = c_int::try_from(version) else {
            return Err(self.unavailable(name, version));
        };
        let mut pfn = ptr::null_mut();
        let mut status = CU_GET_PROC_ADDRESS_SUCCESS;
        // SAFETY: `base` is NUL-terminated; `pfn` and `status` are valid for writes. The call
        // needs no `cuInit`.
        let (code, via) = unsafe {
            match self.proc_address {
                ProcAddress::V2(f) => (
                    f(base.as_ptr(), &mut pfn, requested, flags, &mut status),
                    "cuGetProcAddress_v2",
                ),
                ProcAddress::V1(f) => (
                    f(base.as_ptr(), &mut pfn, requested, flags),
                    "cuGetProcAddress",
                ),
            }
        };
        match code {
            CUDA_SUCCESS if status == CU_GET_PROC_ADDRESS_SUCCESS => NonNull::new(pfn)
                .map(Addr)
                .ok_or_else(|| self.unavailable(name, version)),
            // SYMBOL_NOT_FOUND or VERSION_NOT_SUFFICIENT.
            CUDA_SUCCESS => Err(self.unavailable(name, version)),
            // A version newer than the driver (v2), or an unknown symbol (v1).
            CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_NOT_FOUND => Err(self.unavailable(name, version)),
            _ => Err(self.cuda_error(via, code)),
        }
    }

    /// `Ok` if the driver is CUDA `needs` or newer, else `function`'s [`Error::Unavailable`].
    pub(super) fn require(&'static self, function: &'static str, needs: u32) -> Result<(), Error> {
        match self.version() {
            Ok(found) if found < needs => Err(self.unavailable(function, needs)),
            _ => Ok(()),
        }
    }

    fn unavailable(&'static self, function: &'static str, needs: u32) -> Error {
        Error::Unavailable {
            api: Api::Driver,
            function,
            needs,
            found: self.version().ok(),
            library: &self.library,
        }
    }

    /// `cuDriverGetVersion`.
    fn version(&'static self) -> Result<u32, Error> {
        let Some(get_version) = self.get_version else {
            return Err(Error::Unavailable {
                api: Api::Driver,
                function: "cuDriverGetVersion",
                needs: 2020,
                found: None,
                library: &self.library,
            });
        };
        let mut version: c_int = 0;
        // SAFETY: `version` is valid for writes.
        let code = unsafe { get_version(&mut version) };
        if code != CUDA_SUCCESS {
            return Err(self.cuda_error("cuDriverGetVersion", code));
        }
        Ok(u32::try_from(version).unwrap_or(0))
    }

    fn cuda_error(&'static self, function: &'static str, code: u32) -> Error {
        Error::Cuda {
            api: Api::Driver,
            function,
            code,
        }
    }
}

/// Asks the driver for a code's name or description: a static string of the loaded driver.
fn describe(get: Option<GetErrorText>, code: u32) -> Option<&'static str> {
    let get = get?;
    let mut text = ptr::null();
    // SAFETY: `text` is valid for writes; on success it points at a static C string.
    let rc = unsafe { get(code, &mut text) };
    if rc != CUDA_SUCCESS || text.is_null() {
        return None;
    }
    // SAFETY: checked non-NULL above; the driver's strings are NUL-terminated and live as long
    // as the driver, which is never unloaded.
    unsafe { CStr::from_ptr(text) }.to_str().ok()
}

/// The name of `code` from `cuGetErrorName`, if the driver is loaded and knows it.
pub(super) fn error_name(code: u32) -> Option<&'static str> {
    describe(DRIVER.get()?.error_name, code)
}

/// The description of `code` from `cuGetErrorString`, or why there is none.
pub(super) fn error_description(code: u32) -> Cow<'static, str> {
    match DRIVER.get() {
        Some(d) => match describe(d.error_string, code) {
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(format!("{} gave no description of this code", d.library)),
        },
        None => Cow::Owned(format!("no description, since {LIBRARY} is not loaded")),
    }
}

/// Maps a driver call's `CUresult` to `Ok(())` or [`Error::Cuda`] naming `function`. The error
/// is three stores; the code's name and description are looked up when it is displayed.
/// [`UNRESOLVED`](super::UNRESOLVED), from a first call that could not resolve its function,
/// becomes the error that call left ([`Error::Unavailable`], [`Error::LibraryNotFound`], ..).
#[inline(always)]
pub fn driver_result(function: &'static str, code: u32) -> Result<(), Error> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else if code == super::UNRESOLVED {
        Err(*super::first::unresolved_error(Api::Driver, function, code))
    } else {
        Err(Error::Cuda {
            api: Api::Driver,
            function,
            code,
        })
    }
}

/// [`driver_result`] for the status of a function called through an address from
/// [`DriverFn::resolved`](super::DriverFn::resolved) or [`DriverFn::get`](super::DriverFn::get)
/// (or from [`DriverFn::function`](super::DriverFn::function) once one of those has resolved the
/// entry point), never through a first-call stub: every status is the driver's,
/// [`UNRESOLVED`](super::UNRESOLVED) included, and a caller that only wants the code gets it
/// without a test.
#[inline(always)]
pub fn resolved_driver_result(function: &'static str, code: u32) -> Result<(), Error> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda {
            api: Api::Driver,
            function,
            code,
        })
    }
}

/// The installed driver's CUDA version from `cuDriverGetVersion`, e.g. `13000` for 13.0; loads
/// the driver if needed.
pub fn driver_version() -> Result<u32, Error> {
    Driver::get()?.version()
}
