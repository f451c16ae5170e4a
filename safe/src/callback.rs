//! The trampolines CUDA calls for Rust closures, the entry check of every call, and the cells
//! that carry closures to CUDA. Whether a thread is inside a callback is [`crate::inside`]'s;
//! what callbacks leave to a program thread (closure drops, handle destructions), the reaper's.
//!
//! A trampoline is the `extern "C"` function CUDA calls with the boxed closure as user data. It
//! marks the thread as inside a callback, catches any panic (reported through
//! [`crate::panic`]), and never unwinds into the driver. No trampoline drops a closure: each
//! hands it to the reaper ([`crate::reaper`]), which drops it on a program thread.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Error;
use crate::inside::{Inside, in_callback};
use crate::panic::{PanicStage, report};
use crate::reaper;
use crate::record;
use crate::sticky::Book;

/// The function type CUDA calls for a host function or a user-object destructor.
pub(crate) type HostFn = unsafe extern "C" fn(*mut c_void);

/// The entry check of every public call that reaches CUDA: refused inside a callback; outside
/// one, destructions deferred by callbacks run first.
///
/// Inlined into every call: a thread-local read and an atomic load, with the deferred
/// destructions out of line.
#[inline(always)]
pub(crate) fn enter(operation: &'static str) -> Result<(), Error> {
    if in_callback() {
        return Err(Error::InCallback { operation });
    }
    reaper::reap_pending();
    Ok(())
}

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
    fn boxed<T>(cell: T, discard: unsafe fn(*mut c_void)) -> OneShot {
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

/// A closure boxed for any number of calls, as a host function, its user data and the
/// destructor a user object calls once no graph, executable or launch needs it any more.
///
/// Dropping it before [`into_parts`](Self::into_parts) drops the closure uncalled.
pub(crate) struct Shared {
    call: HostFn,
    destroy: HostFn,
    discard: unsafe fn(*mut c_void),
    data: *mut c_void,
}

impl Shared {
    #[inline]
    pub(crate) fn new<F: Fn() + Send + Sync + 'static>(f: F) -> Shared {
        Shared {
            call: call_shared::<F>,
            destroy: drop_shared::<F>,
            discard: discard::<F>,
            data: Box::into_raw(Box::new(f)).cast(),
        }
    }

    /// The host function, the destructor, the drop here (of a closure never handed to CUDA) and
    /// the user data, the box given up: the caller disposes of it through one of the two.
    #[inline]
    pub(crate) fn into_parts(self) -> (HostFn, HostFn, unsafe fn(*mut c_void), *mut c_void) {
        let parts = (self.call, self.destroy, self.discard, self.data);
        std::mem::forget(self);
        parts
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: `data` is the box made in `new` for this `discard`, not handed over.
        unsafe { (self.discard)(self.data) }
    }
}

/// Drops a box of an `F` (one never handed to CUDA, on the thread that made it, or one the
/// reaper drops).
///
/// # Safety
/// `data` is a `Box<F>` the caller owns, given up.
pub(crate) unsafe fn discard<F>(data: *mut c_void) {
    // SAFETY: the caller passes the pointer of a `Box<F>` it owns.
    drop(unsafe { Box::from_raw(data.cast::<F>()) });
}

/// The host function of a closure owned by a user object: calls it by reference.
///
/// # Safety
/// `data` is a `Box<F>` made by [`Shared::new`] that [`drop_shared`] has not dropped yet.
pub(crate) unsafe extern "C" fn call_shared<F: Fn() + Send + Sync>(data: *mut c_void) {
    let _inside = Inside::enter();
    // SAFETY: by this function's contract, the closure is alive; `F: Sync`, so concurrent
    // launches may share it.
    let f = unsafe { &*data.cast::<F>() };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report(PanicStage::Call, payload);
    }
}

/// The user-object destructor of a closure (or of any value a graph keeps), once the last
/// holder is gone: hands it to the reaper, which drops it on a program thread.
///
/// # Safety
/// `data` is a `Box<F>` made by [`Shared::new`]; called once, after every call.
pub(crate) unsafe extern "C" fn drop_shared<F: Send + 'static>(data: *mut c_void) {
    let _inside = Inside::enter();
    // SAFETY: by this function's contract, the box is ours; `F: Send`.
    unsafe { release::<F>(data, discard::<F>) };
}

/// Disposes of a box of a `T` that CUDA is done with: hands it to the reaper when dropping a
/// `T` runs code (a `Drop` somewhere in it), else frees the memory here (freeing memory is no
/// CUDA call; nothing of the closure runs).
///
/// # Safety
/// As [`reaper::drop_later`]: `drop(data)` drops the `T` behind `data` and frees its memory, once.
#[inline(always)]
unsafe fn release<T: Send + 'static>(data: *mut c_void, drop: reaper::DropFn) {
    if std::mem::needs_drop::<T>() {
        // SAFETY: the caller's contract.
        unsafe { reaper::drop_later(data, drop) }
    } else {
        // SAFETY: the caller's contract; `T` has no drop code, so this only frees the box.
        unsafe { drop(data) }
    }
}

#[cfg(test)]
mod tests {
    //! The trampolines are called here exactly as CUDA calls them: an `extern "C"` function
    //! with the boxed closure as its user data.

    use super::*;
    use crate::panic::take_panic_hook;
    use crate::panic::tests::{HOOK_LOCK, recording_hook};
    use crate::reaper::{deferred, destroy};
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    /// Counts its drops, and names the threads it was dropped on.
    struct Tally(Arc<AtomicUsize>, Arc<Mutex<Vec<Option<String>>>>);

    impl Drop for Tally {
        fn drop(&mut self) {
            let name = std::thread::current().name().map(str::to_owned);
            self.1.lock().unwrap().push(name);
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> Arc<AtomicUsize> {
        Arc::new(AtomicUsize::new(0))
    }

    fn tally(drops: &Arc<AtomicUsize>, threads: &Arc<Mutex<Vec<Option<String>>>>) -> Tally {
        Tally(Arc::clone(drops), Arc::clone(threads))
    }

    fn threads() -> Arc<Mutex<Vec<Option<String>>>> {
        Arc::new(Mutex::new(Vec::new()))
    }

    fn reaper_only(threads: &Mutex<Vec<Option<String>>>, n: usize) {
        let seen = threads.lock().unwrap().clone();
        assert_eq!(seen, vec![Some(crate::REAPER_THREAD_NAME.to_owned()); n]);
    }

    /// A one-shot closure of `Stream::launch_with_sync_mode` ([`Guarded`]) on a healthy stream,
    /// as one host function: `parts` gives a function that makes the host function's call and
    /// then the guard's, as CUDA makes them.
    struct Once {
        inner: Guarded,
        call: HostFn,
    }

    impl Once {
        fn new<F: FnMut() + Send + 'static>(f: F) -> Once {
            unsafe extern "C" fn host_then_guard<F: FnMut() + Send + 'static>(data: *mut c_void) {
                unsafe {
                    guarded_call::<F>(data);
                    guard_call::<F>(0, data);
                }
            }
            Once {
                inner: Guarded::new(&Arc::new(Book::default()), f),
                call: host_then_guard::<F>,
            }
        }

        fn parts(&self) -> (HostFn, *mut c_void) {
            (self.call, self.inner.parts().1)
        }

        fn hand_over(self) {
            self.inner.hand_over();
        }
    }

    #[test]
    fn a_guarded_closure_skipped_by_cuda_is_dropped_uncalled_and_recorded() {
        let (calls, drops, where_) = (counter(), counter(), threads());
        let book = Arc::new(Book::default());
        let make = || {
            let (c, tally) = (Arc::clone(&calls), tally(&drops, &where_));
            move || {
                let _keep = &tally;
                c.fetch_add(1, Ordering::SeqCst);
            }
        };
        type Guard = unsafe fn(u32, *mut c_void);
        fn hand_over<F: FnMut() + Send + 'static>(
            book: &Arc<Book>,
            f: F,
        ) -> (HostFn, Guard, *mut c_void) {
            let guarded = Guarded::new(book, f);
            let (call, data) = guarded.parts();
            guarded.hand_over();
            (call, guard_call::<F>, data)
        }
        // A failed context: CUDA skips the host function and makes the guard with the error.
        let (_, guard, data) = hand_over(&book, make());
        unsafe { guard(719, data) };
        assert_eq!(Arc::strong_count(&book), 1, "the guard released the book");
        assert!(book.any(), "the skip is recorded");
        crate::wait_for_drops().unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // A healthy one: called by the host function, released by the guard, not recorded.
        let book = Arc::new(Book::default());
        let (call, guard, data) = hand_over(&book, make());
        unsafe { call(data) };
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        crate::wait_for_drops().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "kept until the guard");
        unsafe { guard(0, data) };
        crate::wait_for_drops().unwrap();
        assert!(!book.any());
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        reaper_only(&where_, 2);
    }

    #[test]
    fn a_one_shot_closure_runs_once_then_the_reaper_drops_it() {
        let (calls, drops, where_) = (counter(), counter(), threads());
        let inside = Arc::new(AtomicBool::new(false));
        let (c, tally, i) = (
            Arc::clone(&calls),
            tally(&drops, &where_),
            Arc::clone(&inside),
        );
        let once = Once::new(move || {
            let _keep = &tally;
            c.fetch_add(1, Ordering::SeqCst);
            i.store(in_callback(), Ordering::SeqCst);
        });
        let (f, data) = once.parts();
        once.hand_over();
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        unsafe { f(data) };
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        crate::wait_for_drops().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        reaper_only(&where_, 1);
        assert!(
            inside.load(Ordering::SeqCst),
            "the closure runs marked as inside"
        );
        assert!(!in_callback());
    }

    #[test]
    fn a_stream_callback_runs_or_skips_its_closure_and_always_hands_it_over() {
        let book = Arc::new(Book::default());
        let (calls, drops, where_) = (counter(), counter(), threads());
        let make = || {
            let (c, t) = (Arc::clone(&calls), tally(&drops, &where_));
            move || {
                let _keep = &t;
                c.fetch_add(1, Ordering::SeqCst);
            }
        };
        fn parts<F: FnMut() + Send + 'static>(book: &Arc<Book>, f: F) -> *mut c_void {
            let once = OneShot::new(book, f);
            let data = once.data();
            once.hand_over();
            data
        }
        fn call<F: FnMut() + Send + 'static>(_: &F, status: u32, data: *mut c_void) {
            unsafe { stream_call::<F>(status, data) };
        }
        let f = make();
        let data = parts(&book, make());
        assert_eq!(Arc::strong_count(&book), 2, "the cell holds the book");
        call(&f, 0, data);
        assert_eq!(Arc::strong_count(&book), 1, "released after the call");
        assert!(!book.any());
        let data = parts(&book, make());
        call(&f, 719, data);
        assert_eq!(Arc::strong_count(&book), 1);
        assert!(book.any(), "the skip is recorded");
        drop(f);
        crate::wait_for_drops().unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "the skipped closure is not called"
        );
        // The two handed over, on the reaper; the third (`f`, never handed over) here.
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        let seen = where_.lock().unwrap().clone();
        let on_reaper = seen
            .iter()
            .filter(|n| n.as_deref() == Some(crate::REAPER_THREAD_NAME))
            .count();
        assert_eq!(on_reaper, 2, "{seen:?}");
        // Refused by CUDA (never handed over): dropped here with its book reference.
        drop(OneShot::new(&book, make()));
        assert_eq!(Arc::strong_count(&book), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_closure_not_handed_over_is_dropped_uncalled() {
        let (calls, drops, where_) = (counter(), counter(), threads());
        let (c, tally1) = (Arc::clone(&calls), tally(&drops, &where_));
        drop(Once::new(move || {
            let _keep = &tally1;
            c.fetch_add(1, Ordering::SeqCst);
        }));
        let tally2 = tally(&drops, &where_);
        drop(Shared::new(move || {
            let _keep = &tally2;
        }));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_shared_closure_runs_on_every_call_and_its_destructor_hands_it_to_the_reaper() {
        let (calls, drops, where_) = (counter(), counter(), threads());
        let (c, tally) = (Arc::clone(&calls), tally(&drops, &where_));
        let shared = Shared::new(move || {
            let _keep = &tally;
            c.fetch_add(1, Ordering::SeqCst);
        });
        let (call, destroy, _, data) = shared.into_parts();
        for _ in 0..1000 {
            unsafe { call(data) };
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1000);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        unsafe { destroy(data) };
        crate::wait_for_drops().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        reaper_only(&where_, 1);
    }

    #[test]
    fn panics_are_reported_and_never_leave_the_trampoline() {
        let _guard = HOOK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let seen = recording_hook();
        let (drops, where_) = (counter(), threads());

        let tally = tally(&drops, &where_);
        let once = Once::new(move || {
            let _keep = &tally;
            panic!("one-shot failure {}", 7);
        });
        let (f, data) = once.parts();
        once.hand_over();
        unsafe { f(data) };
        assert!(!in_callback(), "the marker is cleared after a panic");

        let shared = Shared::new(|| panic!("shared failure"));
        let (call, destroy, _, data) = shared.into_parts();
        unsafe { call(data) };
        unsafe { call(data) };
        unsafe { destroy(data) };

        struct LoudDrop;
        impl Drop for LoudDrop {
            fn drop(&mut self) {
                panic!("drop failure");
            }
        }
        let loud = LoudDrop;
        let shared = Shared::new(move || {
            let _keep = &loud;
        });
        let (call, destroy, _, data) = shared.into_parts();
        unsafe { call(data) };
        unsafe { destroy(data) };
        crate::wait_for_drops().unwrap();

        take_panic_hook();
        let seen = seen.lock().unwrap().clone();
        let text = |s: &str| Some(s.to_owned());
        assert_eq!(
            seen,
            vec![
                (PanicStage::Call, text("one-shot failure 7")),
                (PanicStage::Call, text("shared failure")),
                (PanicStage::Call, text("shared failure")),
                (PanicStage::Drop, text("drop failure")),
            ]
        );
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the panicking closure's state is dropped"
        );
    }

    /// A destruction that counts its runs, and those that ran inside a callback.
    fn counted(
        ran: &Arc<AtomicUsize>,
        inside: &Arc<AtomicUsize>,
    ) -> impl FnOnce() + Send + 'static {
        let (ran, inside) = (Arc::clone(ran), Arc::clone(inside));
        move || {
            if in_callback() {
                inside.fetch_add(1, Ordering::SeqCst);
            }
            ran.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Calls, as CUDA would, a callback whose body is `f`.
    fn call_back(f: impl FnMut() + Send + 'static) {
        let once = Once::new(f);
        let (call, data) = once.parts();
        once.hand_over();
        unsafe { call(data) };
    }

    #[test]
    fn destructions_inside_a_callback_wait_for_an_ordinary_thread() {
        let (ran, inside) = (counter(), counter());
        let refused = Arc::new(Mutex::new(None));
        let (seen, destruction) = (
            Arc::clone(&refused),
            Mutex::new(Some(counted(&ran, &inside))),
        );
        call_back(move || {
            *seen.lock().unwrap() = Some(enter("Stream::launch"));
            if let Some(destruction) = destruction.lock().unwrap().take() {
                destroy((), destruction);
            }
        });
        assert!(matches!(
            refused.lock().unwrap().take(),
            Some(Err(Error::InCallback {
                operation: "Stream::launch"
            }))
        ));
        // The reaper may have run it already; the entry check of a call runs it if not.
        enter("Stream::synchronize").unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(inside.load(Ordering::SeqCst), 0, "it ran inside a callback");

        destroy((), counted(&ran, &inside));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            2,
            "outside a callback it runs now"
        );
    }

    #[test]
    fn the_reaper_runs_destructions_deferred_by_callbacks_without_another_call() {
        let (ran, inside) = (counter(), counter());
        // As a host node's closure would (a graph keeps it: nothing goes to the reaper after).
        {
            let _inside = Inside::enter();
            destroy((), counted(&ran, &inside));
        }
        // No call of this crate from here on: the reaper runs it (or another test's call).
        let start = std::time::Instant::now();
        while ran.load(Ordering::SeqCst) == 0 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "a deferred destruction waited 10 s for a call ({} queued)",
                deferred()
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(inside.load(Ordering::SeqCst), 0, "it ran inside a callback");
    }
}
