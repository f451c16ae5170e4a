//! The stub driver and runtimes (`stub/cuda_stub.c`, `stub/cudart_stub.c`), built by the build
//! script into `HOSTCB_STUB_DIR`: where they are, and their counters.

use std::ffi::{CStr, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;

/// The folder holding `libcuda.so.1`, `libcudart.so.12` and `libcudart.so.13` (and the
/// unversioned links a CUDA install has); first on `LD_LIBRARY_PATH` of every measuring process.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("HOSTCB_STUB_DIR"))
}

/// The stub driver's counters, in `cuda_stub.c`'s order.
#[derive(Debug, Clone, Copy)]
pub enum Count {
    HostCalls,
    LaunchHostFunc,
    CapturedNodes,
    GraphLaunches,
    StreamQueries,
    IsCapturing,
    CaptureInfo,
    UserObjects,
    UserObjectDestroys,
    #[allow(dead_code, reason = "mirrors the C list; counted, not checked")]
    ProcAddress,
    Failed,
    AddCallback,
    #[allow(
        dead_code,
        reason = "mirrors the C list; only a simulated driver version counts it"
    )]
    NotImplemented,
    StreamSyncs,
    EventRecords,
    EventQueries,
    #[allow(
        dead_code,
        reason = "mirrors the C list; checked by tests/stub/stub_driver.rs"
    )]
    StreamDestroys,
    #[allow(
        dead_code,
        reason = "mirrors the C list; checked by tests/stub/stub_driver.rs"
    )]
    DestroyedAfterRelease,
}

impl Count {
    pub const LEN: usize = 18;
}

/// A stub runtime's counters, in `cudart_stub.c`'s order.
#[derive(Debug, Clone, Copy)]
pub enum RtCount {
    HostCalls,
    LaunchHostFunc,
    #[allow(dead_code, reason = "mirrors the C list; counted, not checked")]
    StreamQueries,
    #[allow(dead_code, reason = "mirrors the C list; counted, not checked")]
    Failed,
}

impl RtCount {
    pub const LEN: usize = 4;
}

type CountFn = unsafe extern "C" fn(i32) -> u64;
type SetPendingFn = unsafe extern "C" fn(*mut c_void, i32);
type ProcAddressFn = unsafe extern "C" fn(*const i8, *mut *mut c_void, i32, u64, *mut i32) -> i32;

/// The libraries as this process loaded them (by the system loader, as every path does).
struct Libs {
    driver: Library,
    rt12: Library,
    rt13: Library,
}

fn libs() -> Result<&'static Libs, String> {
    static LIBS: OnceLock<Result<Libs, String>> = OnceLock::new();
    LIBS.get_or_init(|| {
        let open = |name: &str| {
            // SAFETY: the stub libraries run no initialisers.
            unsafe { Library::new(name) }.map_err(|e| format!("cannot load {name}: {e}"))
        };
        Ok(Libs {
            driver: open("libcuda.so.1")?,
            rt12: open("libcudart.so.12")?,
            rt13: open("libcudart.so.13")?,
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn symbol<T: Copy>(lib: &Library, name: &CStr, file: &str) -> Result<T, String> {
    // SAFETY: the caller names the symbol's C type.
    unsafe { lib.get::<T>(name.to_bytes_with_nul()) }
        .map(|s| *s)
        .map_err(|_| {
            format!(
                "{file} as the system loader finds it has no {}: it is not the stub of {} (check LD_LIBRARY_PATH)",
                name.to_string_lossy(),
                dir().display()
            )
        })
}

/// Fails unless the libraries the system loader finds are the stubs.
pub fn check_loaded() -> Result<(), String> {
    let libs = libs()?;
    symbol::<CountFn>(&libs.driver, c"hostcb_stub_count", "libcuda.so.1")?;
    symbol::<CountFn>(&libs.rt12, c"hostcb_stub_rt_count", "libcudart.so.12")?;
    symbol::<CountFn>(&libs.rt13, c"hostcb_stub_rt_count", "libcudart.so.13")?;
    Ok(())
}

/// Every counter of the stub driver.
pub fn driver_counts() -> [u64; Count::LEN] {
    let f = libs()
        .and_then(|l| symbol::<CountFn>(&l.driver, c"hostcb_stub_count", "libcuda.so.1"))
        .expect("check_loaded() passed");
    // SAFETY: the stub's counter read.
    std::array::from_fn(|i| unsafe { f(i as i32) })
}

/// Every counter of the stub runtime of major `major` (12 or 13).
pub fn runtime_counts(major: u32) -> [u64; RtCount::LEN] {
    let f = libs()
        .and_then(|l| {
            let lib = if major == 12 { &l.rt12 } else { &l.rt13 };
            symbol::<CountFn>(lib, c"hostcb_stub_rt_count", "libcudart")
        })
        .expect("check_loaded() passed");
    // SAFETY: the stub's counter read.
    std::array::from_fn(|i| unsafe { f(i as i32) })
}

/// Marks a stub stream busy (its `cuStreamQuery` returns `CUDA_ERROR_NOT_READY`) or idle.
pub fn set_pending(stream: *mut c_void, busy: bool) -> Result<(), String> {
    let f = symbol::<SetPendingFn>(&libs()?.driver, c"hostcb_stub_set_pending", "libcuda.so.1")?;
    // SAFETY: a stream the stub made.
    unsafe { f(stream, i32::from(busy)) };
    Ok(())
}

/// `cuGetProcAddress_v2(name, version)` of the loaded driver, as a Rust program would call it.
pub fn driver_proc(name: &str, version: i32) -> Result<*mut c_void, String> {
    let get = symbol::<ProcAddressFn>(&libs()?.driver, c"cuGetProcAddress_v2", "libcuda.so.1")?;
    let cname = std::ffi::CString::new(name).expect("a C identifier");
    let (mut pfn, mut status) = (std::ptr::null_mut(), -1);
    // SAFETY: valid out-pointers; legacy stream flag.
    let rc = unsafe { get(cname.as_ptr(), &mut pfn, version, 1, &mut status) };
    if rc != 0 || status != 0 || pfn.is_null() {
        return Err(format!(
            "cuGetProcAddress_v2({name}, {version}): code {rc}, status {status}"
        ));
    }
    Ok(pfn)
}

/// The address of `name` in the loaded runtime of major `major`.
pub fn runtime_symbol(major: u32, name: &CStr) -> Result<*mut c_void, String> {
    let l = libs()?;
    let lib = if major == 12 { &l.rt12 } else { &l.rt13 };
    symbol::<*mut c_void>(lib, name, "libcudart")
}
