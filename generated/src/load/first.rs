//! The first call through an entry point.
//!
//! An entry point ([`DriverFn`](super::DriverFn), [`RuntimeFn`](super::RuntimeFn)) holds the
//! address its wrapper calls. Until the function is resolved, that address is a *first-call
//! stub* of the function's own C type, made for that entry point (as a dynamic linker's lazy
//! PLT entry is): the stub resolves the entry point, which stores the library's address, so
//! later calls go straight to CUDA, and then calls the function with the arguments it was
//! given, unchanged, returning what CUDA returns. So a wrapper is one load and one call, as a C
//! caller's call through a `cuGetProcAddress` pointer: no test, no branch, no stack frame.
//!
//! When the function cannot be resolved (no library, or the installed CUDA lacks it), the stub
//! returns [`UNRESOLVED`], a status no CUDA version defines, and leaves the typed error with
//! the calling thread. The result mappers ([`driver_result`](super::driver_result),
//! [`runtime_result`](super::runtime_result)) turn that status back into the error on their
//! error path, which a caller that checks the status takes anyway.
//!
//! # One mechanism, one cast
//!
//! These stubs are the only self-patching function pointers on a call's path, and the loader's
//! `as_fn` the only place an address becomes a function. What they are worth, counted by
//! callgrind over the stub driver (`cargo bench -p hostcb-cpu-bench --bench cpu -- --count`,
//! instructions per call, the host function's own work included):
//!
//! | path | first-call stub | a test per call instead |
//! | --- | ---: | ---: |
//! | `cuLaunchHostFunc(..)?` (`ours_driver_launch_checked`) | 34 | 41 |
//! | `cudaLaunchHostFunc(..)?` (`ours_rt13_launch_checked`) | 23 | 27 |
//!
//! (cudarc's checked calls: 37 and 28; the right column is the loader before the stubs, same
//! bench.) They cost build time instead: one stub per entry point, about 1.9 s of CPU in a cold
//! build of one target.
//!
//! The safe layer had a second one: a *gate* for `cuGraphLaunch`, a pointer that held the
//! driver's function, or, while destructions deferred by callbacks waited, a closed function of
//! the same type that ran them and opened the gate again; deferring closed every gate. It spared
//! `GraphExec::launch` the pending-destruction check, a load of a global, a test and the stack
//! frame its cold call needs: 48 instructions against 54 through the entry point with the check
//! (58 through the checked wrapper; C's own `cuGraphLaunch` 43). One mechanism is kept: the
//! gate went, and `GraphExec::launch` makes only the thread-local callback check and calls
//! `cuGraphLaunch`'s entry point, resolved by `Graph::instantiate`, mapping the status with
//! [`resolved_driver_result`](super::resolved_driver_result) (no [`UNRESOLVED`] test, so the
//! call stays a tail call): 48 again. The destructions it no longer runs wait for the next
//! other call of the safe layer.

use std::cell::Cell;
use std::ffi::c_void;

use crate::error::{Api, Error};

/// The status a first-call stub returns when its function cannot be resolved; the thread's
/// [`take_unresolved`] then gives the error. No CUDA version defines it: `CUresult` and
/// `cudaError_t` values are below 10,000 (the test `unresolved_is_no_cuda_status` checks
/// every target's enumerators).
pub const UNRESOLVED: u32 = 0x7e57_0001;

thread_local! {
    /// The error of this thread's last first call that could not resolve its function.
    static LEFT: Cell<Option<&'static Error>> = const { Cell::new(None) };
}

/// The error of this thread's last call that returned [`UNRESOLVED`], once.
pub fn take_unresolved() -> Option<&'static Error> {
    LEFT.take()
}

/// What a result mapper makes of [`UNRESOLVED`]: the error the stub left, or, if none was left
/// (a library returned that value itself), the code as a failed call of `function`. A
/// reference, so that the mapper's caller knows the call failed without looking at the error.
#[cold]
#[inline(never)]
pub(super) fn unresolved_error(api: Api, function: &'static str, code: u32) -> &'static Error {
    take_unresolved().unwrap_or_else(|| {
        crate::error::intern(Error::Cuda {
            api,
            function,
            code,
        })
    })
}

/// An entry point that a first-call stub can resolve.
pub trait Resolve: Sync + sealed::Sealed {
    /// Resolves the entry point (storing the address for later calls) and returns the
    /// address, or why it cannot be had.
    #[doc(hidden)]
    fn resolve_first(&'static self) -> Result<*const c_void, &'static Error>;
}

pub(super) mod sealed {
    /// Only the loader's entry points resolve.
    pub trait Sealed {}
}

/// Only the generated status types are [`Status`]es: implemented by the generated files, and
/// not nameable outside this crate.
#[doc(hidden)]
pub trait StatusSealed {}

/// A C function-pointer type that has first-call stubs: `unsafe extern "C" fn(A0, .., An) ->
/// R` for up to 20 parameters whose return type `R` is a 32-bit status (`CUresult`,
/// `cudaError_t`).
///
/// `S` names the entry point the stub resolves: a marker type whose [`NamedEntry`]
/// implementation returns it, so that each entry point has its own stub.
///
/// # Safety
///
/// An implementation's `STUB` must be a function of type `Self` that resolves the entry point
/// `S` names and calls it with its arguments, or returns [`UNRESOLVED`].
pub unsafe trait FirstCall<S, T>: Copy {
    /// The stub, as an address.
    const STUB: *const c_void;
}

/// A marker type that names one entry point to its first-call stub: each generated static
/// declares one of its own in its initializer (an `enum` without variants, which no value can
/// be made of), whose implementation returns that static. The stub calls [`NamedEntry::entry`]:
/// a type, not a value, names the entry point, so nothing is made from no bytes.
pub trait NamedEntry: 'static {
    /// The entry point's type ([`DriverFn`](super::DriverFn) or
    /// [`RuntimeFn`](super::RuntimeFn) of its C type).
    type Entry: 'static;
    /// The entry point this type names.
    fn entry() -> &'static Self::Entry;
}

/// A CUDA status type that a first-call stub returns: each target's `CUresult` and
/// `cudaError_t`, and nothing else (the trait is sealed).
///
/// [`Status::from_raw`] builds the status from any integer, [`UNRESOLVED`] included, with the
/// type's own constructor: `Self(raw)`, which compiles only while bindgen emits the status as a
/// newtype of `c_uint` (for which every value is valid). Were it ever emitted as a Rust `enum`,
/// for which an undeclared value is undefined behaviour, the implementations (each generated
/// file's, from `templates/file.rs`) would stop compiling rather than the stubs quietly
/// transmuting. No type outside this crate can be one:
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Mine(u32);
/// impl cuda_hostcb::load::Status for Mine {
///     fn from_raw(raw: u32) -> Self {
///         Mine(raw)
///     }
/// }
/// ```
pub trait Status: Copy + StatusSealed {
    /// The status of value `raw`.
    #[doc(hidden)]
    fn from_raw(raw: u32) -> Self;
}

// A plain status integer (entry points declared by hand, as a test's, may return one).
impl StatusSealed for u32 {}
impl Status for u32 {
    #[inline(always)]
    fn from_raw(raw: u32) -> Self {
        raw
    }
}

/// `UNRESOLVED` as the status type `R`, with `error` left for the thread.
fn unresolved<R: Status>(error: &'static Error) -> R {
    R::from_raw(leave(error))
}

/// Leaves `error` for the thread; [`UNRESOLVED`]. Out of line and not generic, as is
/// [`resolve`], so that each entry point's stub is only its call and its forward (hundreds of
/// stubs per target: their size is build time).
#[cold]
#[inline(never)]
fn leave(error: &'static Error) -> u32 {
    LEFT.set(Some(error));
    UNRESOLVED
}

/// Resolves `entry` (see [`Resolve`]).
#[inline(never)]
fn resolve(entry: &'static dyn Resolve) -> Result<*const c_void, &'static Error> {
    entry.resolve_first()
}

/// Defines a first-call stub and its [`FirstCall`] implementation for each arity.
macro_rules! first_calls {
    ($($stub:ident($($arg:ident: $A:ident),*);)*) => {$(
        /// A first-call stub: resolves the entry point `S` names and calls it with the
        /// arguments unchanged, or returns [`UNRESOLVED`].
        #[allow(improper_ctypes_definitions, clippy::too_many_arguments)]
        unsafe extern "C" fn $stub<S, T, R, $($A),*>($($arg: $A),*) -> R
        where
            S: NamedEntry<Entry = T>,
            T: Resolve + 'static,
            R: Status,
        {
            match resolve(S::entry()) {
                // SAFETY: `FirstCall`'s implementation below is this function's type, which
                // `DriverFn::new`/`RuntimeFn::new` make the entry point's C type; the address
                // is the library's function of that type. The caller upholds its contract.
                Ok(address) => unsafe {
                    super::as_fn::<unsafe extern "C" fn($($A),*) -> R>(address)($($arg),*)
                },
                Err(error) => unresolved(error),
            }
        }

        // SAFETY: the stub resolves `S`'s entry point and forwards to it, or returns
        // `UNRESOLVED`.
        unsafe impl<S, T, R, $($A),*> FirstCall<S, T> for unsafe extern "C" fn($($A),*) -> R
        where
            S: NamedEntry<Entry = T>,
            T: Resolve + 'static,
            R: Status,
        {
            const STUB: *const c_void =
                $stub::<S, T, R, $($A),*> as unsafe extern "C" fn($($A),*) -> R as *const c_void;
        }
    )*};
}

first_calls! {
    first0();
    first1(a0: A0);
    first2(a0: A0, a1: A1);
    first3(a0: A0, a1: A1, a2: A2);
    first4(a0: A0, a1: A1, a2: A2, a3: A3);
    first5(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4);
    first6(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5);
    first7(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6);
    first8(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7);
    first9(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8);
    first10(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9);
    first11(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10);
    first12(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11);
    first13(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12);
    first14(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13);
    first15(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13, a14: A14);
    first16(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13, a14: A14, a15: A15);
    first17(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13, a14: A14, a15: A15, a16: A16);
    first18(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13, a14: A14, a15: A15, a16: A16, a17: A17);
    first19(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13, a14: A14, a15: A15, a16: A16, a17: A17,
        a18: A18);
    first20(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, a8: A8, a9: A9,
        a10: A10, a11: A11, a12: A12, a13: A13, a14: A14, a15: A15, a16: A16, a17: A17,
        a18: A18, a19: A19);
}
