//! The guarded cell of `Stream::launch_with_sync_mode` (a row of the ownership table in
//! `lib.rs`): the closure `cuLaunchHostFunc_v2` calls, and the guard, a `cuStreamAddCallback`
//! callback enqueued right after it, which records a skip and hands the closure to the reaper
//! whether or not the host function ran.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::callback::HostFn;
use crate::inside::Inside;
use crate::once::OneShot;
use crate::panic::{PanicStage, report};
use crate::reaper::release;
use crate::record;
use crate::sticky::Book;
use crate::sys;

/// A one-shot closure with a sync mode: `cuLaunchHostFunc_v2` calls it through [`guarded_call`],
/// and a `cuStreamAddCallback` callback enqueued right after it, the guard ([`guard_call`]),
/// releases it. CUDA offers no stream callback with a sync mode, and after a context error it
/// neither calls nor releases a `cuLaunchHostFunc_v2` function; it does make every stream
/// callback, with the error. So the guard, which runs after the host function or in its place,
/// drops the closure exactly once either way, and records it in the stream's [`Book`] when it
/// was not called.
#[repr(C)]
pub(crate) struct GuardedCell<F> {
    /// Released by the guard.
    book: ManuallyDrop<Arc<Book>>,
    /// Set by the host function once it has run the closure.
    called: AtomicBool,
    f: F,
}

/// A [`GuardedCell`] not handed to CUDA yet (a [`OneShot`] of it); dropping it drops the
/// closure uncalled, here.
pub(crate) struct Guarded {
    cell: OneShot,
    call: HostFn,
}

impl Guarded {
    pub(crate) fn new<F: FnMut() + Send + 'static>(book: &Arc<Book>, f: F) -> Guarded {
        let cell = GuardedCell {
            book: ManuallyDrop::new(Arc::clone(book)),
            called: AtomicBool::new(false),
            f,
        };
        Guarded {
            cell: OneShot::boxed(cell, discard_guarded::<F>),
            call: guarded_call::<F>,
        }
    }

    /// The host function and user data for `cuLaunchHostFunc_v2`; the same user data goes to
    /// the guard's `cuStreamAddCallback` (see [`guard_call`]).
    pub(crate) fn parts(&self) -> (HostFn, *mut c_void) {
        (self.call, self.cell.data())
    }

    /// CUDA accepted the host function: the cell is CUDA's until the guard releases it. If the
    /// guard then cannot be enqueued, the cell stays CUDA's (the host function may still run
    /// it) and is leaked.
    pub(crate) fn hand_over(self) {
        self.cell.hand_over();
    }
}

/// Drops a guarded cell that was never handed to CUDA (its book reference included).
unsafe fn discard_guarded<F>(data: *mut c_void) {
    let cell = data.cast::<GuardedCell<F>>();
    // SAFETY: the caller passes a record of a `GuardedCell<F>` it still owns; the book
    // reference was not taken.
    unsafe {
        ManuallyDrop::drop(&mut (*cell).book);
        record::free_record(cell);
    }
}

/// Drops a guarded cell whose book reference the guard has taken (on the reaper thread).
unsafe fn drop_guarded<F>(data: *mut c_void) {
    // SAFETY: the reaper passes the cell the guard handed over; `book` is already released.
    unsafe { record::free_record(data.cast::<GuardedCell<F>>()) };
}

/// The `cuLaunchHostFunc_v2` host function of a [`Guarded`] closure: calls it by reference and
/// marks it called; the guard releases it.
///
/// # Safety
/// `data` is a [`Guarded`] cell for `F`, handed over, whose guard has not run.
pub(crate) unsafe extern "C" fn guarded_call<F: FnMut() + Send + 'static>(data: *mut c_void) {
    let _inside = Inside::enter();
    let cell = data.cast::<GuardedCell<F>>();
    // SAFETY: by the contract the cell is alive; nothing else uses the closure during its call.
    let f = unsafe { &mut (*cell).f };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report(PanicStage::Call, payload);
    }
    // SAFETY: as above.
    unsafe { (*cell).called.store(true, Ordering::Release) };
}

/// The body of the guard's `cuStreamAddCallback` callback (`sync_mode.rs` wraps it in an
/// `extern "C"` function of the bindings' `CUstreamCallback` type): records the closure as skipped
/// when its host function did not run it (CUDA passes the context's error then), hands the
/// closure to the reaper and releases the book.
///
/// # Safety
/// `data` is a [`Guarded`] cell for `F`, handed over, whose host function was enqueued on the
/// same stream before this callback; CUDA makes this call once.
pub(crate) unsafe fn guard_call<F: FnMut() + Send + 'static>(status: u32, data: *mut c_void) {
    let _inside = Inside::enter();
    let cell = data.cast::<GuardedCell<F>>();
    // SAFETY: by the contract the cell is alive and ours now (the stream ran or skipped its host
    // function before this callback); the book is taken once, here.
    let book = unsafe { ManuallyDrop::take(&mut (*cell).book) };
    // SAFETY: as above.
    let called = unsafe { (*cell).called.load(Ordering::Acquire) };
    // SAFETY: the cell's closure is `Send`; `drop_guarded` drops it once.
    Book::close(
        book,
        |book| {
            if !called {
                book.skip(status);
            }
        },
        // SAFETY: the cell's closure is `Send`; `drop_guarded` drops it once.
        || unsafe { release::<GuardedCell<F>>(data, drop_guarded::<F>) },
    );
}

/// The `cuStreamAddCallback` callback that guards a sync-mode closure (see
/// [`guard_call`]).
///
/// # Safety
/// `data` is a [`Guarded`] cell for `F`, handed over after its host function was enqueued on the
/// stream; CUDA calls this once.
pub(crate) unsafe extern "C" fn on_guard<F: FnMut() + Send + 'static>(
    _: sys::CUstream,
    status: sys::CUresult,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: the caller's contract.
    unsafe { guard_call::<F>(status.0, data) }
}
