//! Opens the CUDA driver and runtime libraries at first use and resolves each function once,
//! lazily, with typed errors instead of panics; the crate never links CUDA.
//!
//! # Library search order
//!
//! Each library is opened by the first call that needs it and stays open for the life of the
//! process (host callbacks may still be pending, so nothing is ever unloaded). A failed search is
//! not remembered: the next call searches again. The error lists every place tried and why it
//! was not used.
//!
//! **Driver** (`libcuda.so.1`):
//! 1. `$CUDA_HOSTCB_LIBCUDA`, the path of the file to load. When set (and not empty), it is the
//!    only file tried.
//! 2. `libcuda.so.1` through the system loader (`LD_LIBRARY_PATH`, the `ldconfig` cache, the
//!    default folders).
//! 3. `$CUDA_HOME`, then `$CUDA_PATH`: `lib64/libcuda.so.1`, then `compat/libcuda.so.1`. The
//!    `stubs/` folder is never searched: its library only returns errors. pip ships no driver.
//!
//! A file is accepted when it exports `cuGetProcAddress_v2` or `cuGetProcAddress` (CUDA 11.3).
//!
//! **Runtime of major version M** (`libcudart.so.M`, M = 12 or 13):
//! 1. `$CUDA_HOSTCB_LIBCUDART_M` (e.g. `CUDA_HOSTCB_LIBCUDART_12`), else `$CUDA_HOSTCB_LIBCUDART`:
//!    the path of the file to load. When set (and not empty), it is the only file tried, and its
//!    `cudaRuntimeGetVersion` must report major version M. A program that uses a 12.x and a 13.x
//!    target together sets the per-major variables.
//! 2. `libcudart.so.M` through the system loader.
//! 3. `$CUDA_HOME`, then `$CUDA_PATH`: `lib64/libcudart.so.M`, then `lib/libcudart.so.M`.
//! 4. The runtime of pip's NVIDIA packages, `nvidia/cuda_runtime/lib/libcudart.so.12` (package
//!    `nvidia-cuda-runtime-cu12`) or `nvidia/cu13/lib/libcudart.so.13` (`nvidia-cuda-runtime`),
//!    under these folders in this order: `$VIRTUAL_ENV/lib/python3.*/site-packages`,
//!    `$CONDA_PREFIX/lib/python3.*/site-packages`, each entry of `$PYTHONPATH`,
//!    `$HOME/.local/lib/python3.*/site-packages`, `/usr/local/lib/python3.*/site-packages`,
//!    `/usr/local/lib/python3.*/dist-packages`, `/usr/lib/python3/dist-packages`
//!    (`python3.*` in name order).
//!
//! A file is accepted when its `cudaRuntimeGetVersion` succeeds and reports major version M. The
//! runtimes of both majors can be loaded in one process.
//!
//! # Functions
//!
//! A driver function is resolved through `cuGetProcAddress_v2` (or `cuGetProcAddress` on drivers
//! older than 12.0) with its own base name and ABI version, so each wrapper gets exactly the ABI
//! it was generated for; a runtime function by `dlsym` in the runtime of its major version.
//! A function the installed CUDA lacks is [`Error::Unavailable`] when called, never a failure
//! at load. Concurrent first calls from several threads are safe.

mod driver;
mod first;
mod runtime;
mod search;
mod slot;
mod stream;

/// The primitives of the entry points' protocol ([`slot`]): the standard library's here; the
/// model-checking crate `tests/loom` compiles `slot.rs` against loom's.
mod sync {
    pub(super) use std::sync::atomic;

    /// A `const fn` here; a plain `fn` under loom, whose atomics have no `const` constructors.
    macro_rules! const_fn {
        ($(#[$meta:meta])* $vis:vis fn $($rest:tt)*) => {
            $(#[$meta])* $vis const fn $($rest)*
        };
    }
    pub(super) use const_fn;
}

use std::borrow::Cow;
use std::ffi::{CStr, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::error::{Api, Error};
use slot::Slot;

pub use driver::{driver_result, driver_version, resolved_driver_result};
pub(crate) use first::StatusSealed;
pub use first::{FirstCall, NamedEntry, Resolve, Status, UNRESOLVED, take_unresolved};
pub use runtime::{runtime_result, runtime_version};
pub use stream::{DefaultStream, default_stream, set_default_stream};

/// The environment variable naming the driver library to load.
pub const LIBCUDA_ENV: &str = "CUDA_HOSTCB_LIBCUDA";
/// The environment variable naming the runtime library to load (for any major version;
/// `CUDA_HOSTCB_LIBCUDART_<major>` names one major's and is tried first).
pub const LIBCUDART_ENV: &str = "CUDA_HOSTCB_LIBCUDART";
/// The environment variable that selects the per-thread default stream when set to `1`.
pub const PER_THREAD_ENV: &str = "CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM";

/// A resolved function address; it stays valid because libraries are never unloaded.
#[derive(Debug, Clone, Copy)]
struct Addr(NonNull<c_void>);

// SAFETY: the address of a function in a library that is never unloaded can be used from any
// thread.
unsafe impl Send for Addr {}
// SAFETY: as above; `Addr` is a plain, immutable address.
unsafe impl Sync for Addr {}

/// What an entry point remembers of its resolution: the address to call (the entry point's
/// first-call stub until the function is resolved, then the library's function: [`slot`]), or
/// the fact that the loaded library lacks the function. Errors that may pass (no library yet, a
/// failing lookup) are not kept, so the next call tries again.
///
/// The address is the whole fast path: one load before the call, inlined into every wrapper.
/// Everything else lives out of line, in the stub (see [`first`]).
#[derive(Debug)]
struct Resolved {
    slot: Slot,
    missing: OnceLock<Error>,
}

impl Resolved {
    const fn new(first: *const c_void) -> Resolved {
        Resolved {
            slot: Slot::new(first),
            missing: OnceLock::new(),
        }
    }

    /// The address to call: the library's function, or the first-call stub.
    #[inline(always)]
    fn address(&self) -> *const c_void {
        self.slot.address()
    }

    /// The library's function, if resolved.
    #[inline(always)]
    fn resolved(&self) -> Option<*const c_void> {
        self.slot.resolved()
    }

    /// Remembers `outcome` when it is final (an address, or [`Error::Unavailable`]); an error
    /// comes back as a `'static` reference (two registers with the address, no stack frame in
    /// the wrapper for it): the remembered one, or an interned copy of one that may pass.
    fn remember(
        &'static self,
        outcome: Result<Addr, Error>,
    ) -> Result<*const c_void, &'static Error> {
        match outcome {
            Ok(addr) => {
                self.slot.publish(addr.0.as_ptr().cast_const());
                Ok(addr.0.as_ptr().cast_const())
            }
            Err(e @ Error::Unavailable { .. }) => Err(self.missing.get_or_init(|| e)),
            Err(e) => Err(crate::error::intern(e)),
        }
    }
}

/// The per-thread-default-stream variant of a driver function: the ABI version
/// `cuGetProcAddress` takes for it (from the header's `PFN_<base>_v<version>_ptsz`/`_ptds`
/// typedef) and the library's export it resolves to (e.g. `cuMemcpyHtoD_v2_ptds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerThreadVariant {
    /// The ABI version of the variant, e.g. `7000`.
    pub version: u32,
    /// The library's export of the variant, e.g. `c"cuStreamAddCallback_ptsz"`.
    pub symbol: &'static CStr,
}

/// One generated function's entry point, whatever its C signature: what tests and tools use to
/// list, resolve and compare every wrapper's entry point (each generated file has a list of them,
/// `entry::ALL`).
pub trait Entry: Sync {
    /// The wrapper's name, which is the C declaration's name (e.g. `cuStreamBeginCapture_v2`).
    fn name(&self) -> &'static str;
    /// The API and library the function comes from.
    fn api(&self) -> crate::error::Api;
    /// The library's export this entry resolves to under `mode` (e.g. `cuStreamAddCallback` or
    /// `cuStreamAddCallback_ptsz`).
    fn export(&self, mode: DefaultStream) -> &'static CStr;
    /// Resolves the entry point (once) under the process's default-stream mode.
    fn address(&'static self) -> Result<*const c_void, Error>;
}

/// What describes a driver function, whatever its C type: the part of [`DriverFn`] that its
/// out-of-line resolution works on.
#[derive(Debug)]
struct DriverMeta {
    name: &'static str,
    symbol: &'static CStr,
    base: &'static CStr,
    version: u32,
    /// The oldest driver that can be shown to have ABI `version` of `base`: the CUDA version of
    /// the first header that declares it (`version` itself, but where a header declared the ABI
    /// later than its number says: `cuLaunchHostFunc` 13010 first appears in 13.2's).
    needs: u32,
    per_thread: Option<PerThreadVariant>,
    resolved: Resolved,
}

impl DriverMeta {
    /// The address, resolving it (once) if needed.
    #[inline(always)]
    fn address(&'static self) -> Result<*const c_void, &'static Error> {
        self.resolved.slot.get_or(|| self.resolve())
    }

    #[cold]
    #[inline(never)]
    fn resolve(&'static self) -> Result<*const c_void, &'static Error> {
        if let Some(missing) = self.resolved.missing.get() {
            return Err(missing);
        }
        let driver = driver::Driver::get().map_err(crate::error::intern)?;
        let (version, per_thread) = match (stream::lock(), self.per_thread) {
            (DefaultStream::PerThread, Some(variant)) => (variant.version, true),
            _ => (self.version, false),
        };
        // A driver older than `needs` may lack the ABI and answer with an older one of the same
        // name (another signature): refused before it is asked.
        let outcome = match self.needs > self.version {
            true => driver.require(self.name, self.needs),
            false => Ok(()),
        }
        .and_then(|()| driver.proc_address(self.name, self.base, version, per_thread));
        self.resolved.remember(outcome)
    }
}

/// A driver function of C type `F`, resolved on first use through `cuGetProcAddress` and
/// cached.
///
/// Meant for a `static` that a wrapper calls through:
/// `static X: DriverFn<unsafe extern "C" fn(..) -> CUresult> = unsafe { DriverFn::new::<M>(..) }`,
/// where `M` is a marker type that names `X` ([`NamedEntry`]), and `entry::X.function()(..)` in
/// the wrapper.
#[derive(Debug)]
pub struct DriverFn<F> {
    meta: DriverMeta,
    signature: PhantomData<F>,
}

impl<F: Copy> DriverFn<F> {
    /// Describes a driver function.
    ///
    /// `name`: the declaration's name, which is the library's legacy export (e.g.
    /// `c"cuLaunchHostFunc_v2"`); `base`: the name `cuGetProcAddress` takes
    /// (`c"cuLaunchHostFunc"`); `version`: the ABI version from `cudaTypedefs.h` (`13010`);
    /// `needs`: the oldest driver version that can be shown to have that ABI, the CUDA version
    /// of the first `cudaTypedefs.h` that declares it (`13020`; most often `version` itself),
    /// below which the function is [`Error::Unavailable`] without asking the driver;
    /// `per_thread`: the per-thread-default-stream variant, if the function has one; `S`: a
    /// marker type whose [`NamedEntry`] implementation returns the static being defined, which
    /// names it to the first-call stub (see [`FirstCall`]).
    ///
    /// # Safety
    ///
    /// `F` must be an `unsafe extern "C" fn` type with the C signature of `base` at ABI
    /// `version`, and of the per-thread variant at its version: [`DriverFn::get`] hands the
    /// driver's address out as an `F`. `S` must name the static this value initialises: its
    /// first-call stub resolves that one.
    pub const unsafe fn new<S>(
        name: &'static CStr,
        base: &'static CStr,
        version: u32,
        needs: u32,
        per_thread: Option<PerThreadVariant>,
    ) -> Self
    where
        S: NamedEntry<Entry = Self>,
        F: FirstCall<S, Self> + 'static,
    {
        Self {
            meta: DriverMeta {
                name: match name.to_str() {
                    Ok(name) => name,
                    Err(_) => panic!("a C identifier is UTF-8"),
                },
                symbol: name,
                base,
                version,
                needs,
                per_thread,
                resolved: Resolved::new(<F as FirstCall<S, Self>>::STUB),
            },
            signature: PhantomData,
        }
    }
}

impl<F: Copy + Sync> Entry for DriverFn<F> {
    fn name(&self) -> &'static str {
        self.meta.name
    }

    fn api(&self) -> crate::error::Api {
        crate::error::Api::Driver
    }

    fn export(&self, mode: DefaultStream) -> &'static CStr {
        match (mode, self.meta.per_thread) {
            (DefaultStream::PerThread, Some(variant)) => variant.symbol,
            _ => self.meta.symbol,
        }
    }

    fn address(&'static self) -> Result<*const c_void, Error> {
        self.meta.address().map_err(|e| *e)
    }
}

/// What describes a runtime function, whatever its C type: the part of [`RuntimeFn`] that its
/// out-of-line resolution works on.
#[derive(Debug)]
struct RuntimeMeta {
    name: &'static str,
    major: u32,
    symbol: &'static CStr,
    per_thread_symbol: Option<&'static CStr>,
    needs: u32,
    resolved: Resolved,
}

impl RuntimeMeta {
    /// The address, resolving it (once) if needed.
    #[inline(always)]
    fn address(&'static self) -> Result<*const c_void, &'static Error> {
        self.resolved.slot.get_or(|| self.resolve())
    }

    #[cold]
    #[inline(never)]
    fn resolve(&'static self) -> Result<*const c_void, &'static Error> {
        if let Some(missing) = self.resolved.missing.get() {
            return Err(missing);
        }
        let rt = runtime::Runtime::get(self.major).map_err(crate::error::intern)?;
        let symbol = match (stream::lock(), self.per_thread_symbol) {
            (DefaultStream::PerThread, Some(per_thread)) => per_thread,
            _ => self.symbol,
        };
        let outcome = rt.symbol(self.name, symbol, self.needs);
        self.resolved.remember(outcome)
    }
}

/// A runtime function of one major version and C type `F`, resolved on first use by `dlsym`
/// and cached.
///
/// Meant for a `static` that a wrapper calls through:
/// `static X: RuntimeFn<unsafe extern "C" fn(..) -> cudaError_t> = unsafe { RuntimeFn::new::<M>(..) }`,
/// where `M` is a marker type that names `X` ([`NamedEntry`]), and `entry::X.function()(..)` in
/// the wrapper.
#[derive(Debug)]
pub struct RuntimeFn<F> {
    meta: RuntimeMeta,
    signature: PhantomData<F>,
}

impl<F: Copy> RuntimeFn<F> {
    /// Describes a runtime function.
    ///
    /// `symbol`: the declaration's name, which is the runtime's legacy export; `major`: the
    /// runtime's major version (12 or 13); `per_thread_symbol`: the per-thread default-stream
    /// variant (e.g. `c"cudaLaunchHostFunc_ptsz"`), if any; `needs`: the CUDA version the
    /// function first appeared in (e.g. `13010`), for the message when the installed runtime
    /// lacks it; `S`: a marker type whose [`NamedEntry`] implementation returns the static
    /// being defined, which names it to the first-call stub (see [`FirstCall`]).
    ///
    /// # Safety
    ///
    /// `F` must be an `unsafe extern "C" fn` type with the C signature of `symbol` (and of its
    /// per-thread variant): [`RuntimeFn::get`] hands the export's address out as an `F`. `S`
    /// must name the static this value initialises: its first-call stub resolves that one.
    pub const unsafe fn new<S>(
        symbol: &'static CStr,
        major: u32,
        per_thread_symbol: Option<&'static CStr>,
        needs: u32,
    ) -> Self
    where
        S: NamedEntry<Entry = Self>,
        F: FirstCall<S, Self> + 'static,
    {
        Self {
            meta: RuntimeMeta {
                name: match symbol.to_str() {
                    Ok(name) => name,
                    Err(_) => panic!("a C identifier is UTF-8"),
                },
                major,
                symbol,
                per_thread_symbol,
                needs,
                resolved: Resolved::new(<F as FirstCall<S, Self>>::STUB),
            },
            signature: PhantomData,
        }
    }
}

impl<F: Copy + Sync> Entry for RuntimeFn<F> {
    fn name(&self) -> &'static str {
        self.meta.name
    }

    fn api(&self) -> crate::error::Api {
        crate::error::Api::Runtime {
            major: self.meta.major,
        }
    }

    fn export(&self, mode: DefaultStream) -> &'static CStr {
        match (mode, self.meta.per_thread_symbol) {
            (DefaultStream::PerThread, Some(per_thread)) => per_thread,
            _ => self.meta.symbol,
        }
    }

    fn address(&'static self) -> Result<*const c_void, Error> {
        self.meta.address().map_err(|e| *e)
    }
}

/// What [`DriverFn`] and [`RuntimeFn`] share, over their `meta` (a [`DriverMeta`] or a
/// [`RuntimeMeta`]): resolving, the function to call, and peeking.
macro_rules! entry_point_functions {
    ($entry:ident, $library:literal, $mapper:literal) => {
        impl<F: Copy> $entry<F> {
            /// Resolves the function (once) and returns it, typed. After the first call this is
            /// two loads and a test.
            #[inline(always)]
            pub fn get(&'static self) -> Result<F, Error> {
                match self.meta.address() {
                    // SAFETY: `new`'s contract makes `F` the function's C type.
                    Ok(address) => Ok(unsafe { as_fn::<F>(address) }),
                    Err(e) => Err(*e),
                }
            }

            #[doc = concat!(
                "The function to call: the ", $library, "'s once resolved, until then the entry \
                 point's first-call stub, which resolves it and forwards the call. One load; \
                 what the wrappers call. A call that returns [`UNRESOLVED`] could not resolve \
                 the function: [`take_unresolved`] gives why ([`", $mapper, "`] does that)."
            )]
            #[inline(always)]
            pub fn function(&'static self) -> F {
                // SAFETY: `new`'s contract makes `F` the function's C type, and the stub's type
                // is `F`.
                unsafe { as_fn::<F>(self.meta.resolved.address()) }
            }

            /// The function if it is already resolved, without resolving it.
            #[inline(always)]
            pub fn resolved(&'static self) -> Option<F> {
                // SAFETY: `new`'s contract makes `F` the function's C type.
                self.meta
                    .resolved
                    .resolved()
                    .map(|address| unsafe { as_fn::<F>(address) })
            }
        }

        impl<F> first::sealed::Sealed for $entry<F> {}

        impl<F: Sync> Resolve for $entry<F> {
            fn resolve_first(&'static self) -> Result<*const c_void, &'static Error> {
                self.meta.address()
            }
        }
    };
}

entry_point_functions!(DriverFn, "driver", "driver_result");
entry_point_functions!(RuntimeFn, "runtime", "runtime_result");

/// The name of a CUDA error code of `api`, from the loaded library (`cuGetErrorName` or
/// `cudaGetErrorName`), or a phrase saying it is unknown. What [`Error::Cuda`] displays.
pub(crate) fn error_name(api: Api, code: u32) -> &'static str {
    match api {
        Api::Driver => driver::error_name(code).unwrap_or("an unknown CUresult"),
        Api::Runtime { major } => {
            runtime::error_name(major, code).unwrap_or("an unknown cudaError_t")
        }
    }
}

/// The description of a CUDA error code of `api`, from the loaded library
/// (`cuGetErrorString` or `cudaGetErrorString`), or why there is none.
pub(crate) fn error_description(api: Api, code: u32) -> Cow<'static, str> {
    match api {
        Api::Driver => driver::error_description(code),
        Api::Runtime { major } => runtime::error_description(major, code),
    }
}

/// A resolved address as the function-pointer type `F`.
///
/// # Safety
///
/// `F` must be a function-pointer type whose C signature is that of the function at `address`.
#[inline]
unsafe fn as_fn<F: Copy>(address: *const c_void) -> F {
    const {
        assert!(
            std::mem::size_of::<F>() == std::mem::size_of::<*const c_void>(),
            "an entry point's type must be a function pointer"
        )
    };
    // SAFETY: the sizes match (checked above) and the caller promises `F` is the function's type.
    unsafe { std::mem::transmute_copy::<*const c_void, F>(&address) }
}

/// The function `name` of `lib` as the pointer type `F`, or `None` if it is absent or NULL.
///
/// # Safety
///
/// `F` must be the function-pointer type of `name`'s C declaration.
unsafe fn function<F: Copy>(lib: &libloading::Library, name: &CStr) -> Option<F> {
    // SAFETY: the caller promises `F` matches the symbol; `Option<F>` makes a NULL symbol `None`.
    unsafe { lib.get::<Option<F>>(name) }.ok().and_then(|f| *f)
}
