//! The one-shot cell of `Stream::launch` and of `Stream::launch_fn` on a plain stream (a row of
//! the ownership table in `lib.rs`): the closure boxed with its stream's book, the
//! `cuStreamAddCallback` callback CUDA calls once for it (run, or record the skip), and its drop,
//! on the reaper thread after that call, or here if CUDA never took it.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::inside::Inside;
use crate::panic::{PanicStage, report};
use crate::reaper::release;
use crate::record;
use crate::sticky::Book;
use crate::sys;

/// A one-shot closure enqueued with `cuStreamAddCallback`, boxed with its stream's [`Book`]:
/// CUDA calls the callback exactly once, with success (the closure runs) or with the context's
/// error (it is skipped and the book records it); either way it then goes to the reaper.
#[repr(C)]
pub(crate) struct StreamCell<F> {
    /// Released by the callback, once it has run or skipped the closure.
    book: ManuallyDrop<Arc<Book>>,
    f: F,
}

/// A [`StreamCell`] not handed to CUDA yet; dropping it drops the closure uncalled, here.
pub(crate) struct OneShot {
    discard: unsafe fn(*mut c_void),
    data: *mut c_void,
}

impl OneShot {
    #[inline]
    pub(crate) fn new<F: FnMut() + Send + 'static>(book: &Arc<Book>, f: F) -> OneShot {
        let cell = StreamCell {
            book: ManuallyDrop::new(Arc::clone(book)),
            f,
        };
        OneShot::boxed(cell, discard_cell::<F>)
    }

    /// `cell` on the heap ([`record`]), owned until handed over; `discard` drops a record of
    /// it never handed over.
    #[inline]
    pub(crate) fn boxed<T>(cell: T, discard: unsafe fn(*mut c_void)) -> OneShot {
        OneShot {
            discard,
            data: record::new(cell).cast(),
        }
    }

    /// The user data to give CUDA with the stream's callback for `F` (see [`stream_call`]).
    #[inline]
    pub(crate) fn data(&self) -> *mut c_void {
        self.data
    }

    /// CUDA accepted the callback: it makes it exactly once.
    #[inline]
    pub(crate) fn hand_over(self) {
        std::mem::forget(self);
    }
}

impl Drop for OneShot {
    fn drop(&mut self) {
        // SAFETY: `data` is the cell made in `new` for this `discard`, not handed over.
        unsafe { (self.discard)(self.data) }
    }
}

/// Drops a cell that was never handed to CUDA (its book reference included).
unsafe fn discard_cell<F>(data: *mut c_void) {
    let cell = data.cast::<StreamCell<F>>();
    // SAFETY: the caller passes a record of a `StreamCell<F>` it still owns; the book reference
    // was not taken.
    unsafe {
        ManuallyDrop::drop(&mut (*cell).book);
        record::free_record(cell);
    }
}

/// Drops a cell whose book reference the callback has taken (on the reaper thread).
unsafe fn drop_cell<F>(data: *mut c_void) {
    // SAFETY: the reaper passes the cell `stream_call` handed over; `book` is a `ManuallyDrop`
    // already released, so only the closure is dropped.
    unsafe { record::free_record(data.cast::<StreamCell<F>>()) };
}

/// The body of a `cuStreamAddCallback` callback for a [`OneShot`] of `F` (`stream.rs` wraps it
/// in an `extern "C"` function of the bindings' `CUstreamCallback` type): runs the closure if
/// `status` is success, else records the skip; then hands the closure to the reaper and
/// releases the book.
///
/// # Safety
/// `data` is a [`OneShot`]'s cell for `F`, handed over; CUDA makes this call once.
#[inline(always)]
pub(crate) unsafe fn stream_call<F: FnMut() + Send + 'static>(status: u32, data: *mut c_void) {
    let _inside = Inside::enter();
    let cell = data.cast::<StreamCell<F>>();
    // SAFETY: by the contract the cell is alive and ours; the book is taken once, here.
    let book = unsafe { ManuallyDrop::take(&mut (*cell).book) };
    // The closure run or its skip recorded, the closure handed over, and last the book
    // released: a synchronisation that waits for the stream's callbacks sees the first two once
    // the book is released.
    Book::close(
        book,
        |book| {
            if status == 0 {
                // SAFETY: as above; nothing else uses the closure during its call.
                let f = unsafe { &mut (*cell).f };
                if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
                    report(PanicStage::Call, payload);
                }
            } else {
                book.skip(status);
            }
        },
        // SAFETY: the cell's closure is `Send`; `drop_cell` drops it once.
        || unsafe { release::<StreamCell<F>>(data, drop_cell::<F>) },
    );
}

/// The `cuStreamAddCallback` callback of a one-shot closure `F` (see [`stream_call`]).
///
/// # Safety
/// `data` is a [`OneShot`] cell for `F`, handed over; CUDA calls this once.
pub(crate) unsafe extern "C" fn on_stream<F: FnMut() + Send + 'static>(
    _: sys::CUstream,
    status: sys::CUresult,
    data: *mut c_void,
) {
    // SAFETY: the caller's contract.
    unsafe { stream_call::<F>(status.0, data) }
}
