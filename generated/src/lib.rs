//! CUDA driver and runtime bindings for host callbacks, generated and sealed per CUDA toolkit
//! (CTK) target, loaded lazily at run time.
//!
//! # Quick start
//!
//! Add the crate. Each CTK target is a cargo feature, `ctk-<major>-<minor>`, and a module,
//! `cuda_hostcb::ctk_<major>_<minor>`, with `driver` and `runtime` submodules; the features are
//! additive, and the default, `all-targets`, enables every one. To build only the target you
//! use, name it:
//!
//! ```toml
//! [dependencies]
//! cuda-hostcb = "0.1"    # every target; or, for some only:
//! # cuda-hostcb = { version = "0.1", default-features = false, features = ["ctk-<major>-<minor>"] }
//! ```
//!
//! Without any target the build stops with an error naming these features. No CUDA is needed to
//! build: the driver (`libcuda.so.1`) and runtime libraries are opened when a wrapper is first
//! called. Every wrapper is an `unsafe fn` returning `Result<(), Error>`.
//!
//! A program names the target it was written for (`use cuda_hostcb::ctk_<major>_<minor>::driver
//! as cu;`). This one is written once for every enabled target, through
//! [`for_each_target!`], which calls a macro with each target's module:
//!
//! ```no_run
//! use std::ffi::c_void;
//! use std::ptr;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! /// Runs on a CUDA thread: it may record, but must not panic or call CUDA.
//! unsafe extern "C" fn on_host(data: *mut c_void) {
//!     // SAFETY: `data` is the counter below, alive until the stream is synchronised.
//!     unsafe { &*data.cast::<AtomicU32>() }.fetch_add(1, Ordering::Relaxed);
//! }
//!
//! macro_rules! launch_host_function {
//!     ($target:ident, $version:literal, $runtime_major:literal, [$($capability:ident)*]) => {{
//!         use cuda_hostcb::$target::driver as cu;
//!         let calls = AtomicU32::new(0);
//!         // SAFETY: each handle comes from the call before; `calls` outlives the launch, since
//!         // the stream is synchronised before it goes.
//!         unsafe {
//!             let (mut device, mut ctx, mut stream) = (0, ptr::null_mut(), ptr::null_mut());
//!             cu::cuInit(0)?;
//!             cu::cuDeviceGet(&mut device, 0)?;
//!             cu::cuDevicePrimaryCtxRetain(&mut ctx, device)?;
//!             cu::cuCtxSetCurrent(ctx)?;
//!             cu::cuStreamCreate(&mut stream, 0)?;
//!             let data = ptr::from_ref(&calls).cast_mut().cast::<c_void>();
//!             cu::cuLaunchHostFunc(stream, Some(on_host), data)?; // hands `on_host` to CUDA as is
//!             cu::cuStreamSynchronize(stream)?;
//!             cu::cuStreamDestroy(stream)?;
//!             cu::cuDevicePrimaryCtxRelease(device)?;
//!         }
//!         println!("CTK {}: the host function ran {} time(s)", $version, calls.load(Ordering::Relaxed));
//!     }};
//! }
//!
//! fn main() -> Result<(), cuda_hostcb::Error> {
//!     cuda_hostcb::for_each_target!(launch_host_function);
//!     Ok(())
//! }
//! ```
//!
//! For Rust closures instead of `extern "C"` functions, with their lifetime in streams and
//! graphs handled for you, use the safe layer, the crate `cuda-hostcb-safe`.
//!
//! # One type per C type, flags and errors as C uses them
//!
//! A C type whose definition is the same in every target and in both APIs is one Rust type,
//! defined once in [`common`] and re-exported by every target's `driver` and `runtime` under
//! its C name: a runtime `cudaStream_t` is a driver `CUstream` of any target, with no cast. An
//! enumeration converts into the integers a function takes (`.into()`), flag enumerations
//! combine with `|`, and [`Error::is`] tells a failure apart by its status's name:
//!
//! ```no_run
//! use std::ptr;
//!
//! macro_rules! instantiate_with_flags {
//!     ($target:ident, $version:literal, $runtime_major:literal, [$($capability:ident)*]) => {{
//!         use cuda_hostcb::$target::{driver as cu, runtime as rt};
//!         let (mut stream, mut graph, mut exec) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
//!         // SAFETY: each handle comes from the call before it, and is destroyed once, last.
//!         unsafe {
//!             rt::cudaStreamCreate(&mut stream)?;
//!             rt::cudaGraphCreate(&mut graph, 0)?;
//!             let flags = rt::cudaGraphInstantiateFlags::cudaGraphInstantiateFlagAutoFreeOnLaunch
//!                 | rt::cudaGraphInstantiateFlags::cudaGraphInstantiateFlagUseNodePriority;
//!             rt::cudaGraphInstantiateWithFlags(&mut exec, graph, flags.into())?;
//!             rt::cudaGraphLaunch(exec, stream)?;
//!             match rt::cudaStreamQuery(stream) {
//!                 Err(e) if e.is(rt::cudaError_t::cudaErrorNotReady) => {
//!                     // The runtime's stream is the driver's: no cast.
//!                     cu::cuStreamSynchronize(stream)?;
//!                 }
//!                 done => done?,
//!             }
//!             rt::cudaGraphExecDestroy(exec)?;
//!             rt::cudaGraphDestroy(graph)?;
//!             rt::cudaStreamDestroy(stream)?;
//!         }
//!     }};
//! }
//!
//! fn main() -> Result<(), cuda_hostcb::Error> {
//!     cuda_hostcb::for_each_target!(instantiate_with_flags);
//!     Ok(())
//! }
//! ```
//!
//! # Targets
//!
//! [`for_each_target!`] expands a macro once per enabled target, for code written once for all
//! of them. The [`compatibility`] module tables, for every target, which functions its headers
//! declare and at which ABI version.
//!
//! # Generated and hand-written code
//!
//! Everything under `src/bindings/` is generated by `cargo xtask regen` and sealed: do not
//! edit it. The rest of this crate is hand-written: [`load`] opens the CUDA libraries and
//! resolves each function on its first call, and [`error`] is the one error type of every
//! target.
//!
//! # Host functions are passed through unchanged
//!
//! The wrappers of `cuLaunchHostFunc`, `cudaLaunchHostFunc`, the stream callbacks and host
//! nodes hand the caller's function pointer and user data to CUDA unchanged: there is no
//! trampoline. The caller keeps them alive until every launch that can call them has run; for
//! a host function captured into a graph, until the graph and every executable made from it
//! are destroyed.

pub mod error;
pub mod load;

pub use error::Error;

// The checking half of each target's layout oracle (`bindings/<target>/layout.rs`).
#[cfg(test)]
mod layout_check;

// The target modules (`ctk_<major>_<minor>`) and the `for_each_target!` macro, generated from
// generator/targets.txt and sealed.
#[rustfmt::skip]
mod bindings;
#[allow(unused_imports)] // With no target feature enabled, there is nothing to re-export.
pub use bindings::*;

// No target enabled (`default-features = false` and no `ctk-*` feature): the build script found
// none and lists the features there are, so the build fails with a message that names them
// instead of compiling a crate without bindings. Documentation still builds.
#[cfg(all(hostcb_no_target, not(doc)))]
compile_error!(concat!(
    "cuda-hostcb: no CUDA toolkit target is enabled; enable one or more of the features ",
    env!("HOSTCB_TARGET_FEATURES"),
    " (or `all-targets`, the default), e.g. `cuda-hostcb = { version = \"0.1\", features = [\"all-targets\"] }`; ",
    "cuda-hostcb-safe has a module for each target enabled here"
));

/// The crate's README (its crates.io page), whose Rust blocks are compiled as doctests so that
/// they stay true as written.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
