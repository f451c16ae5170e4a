//! What the cells that carry closures to CUDA share: the host-function type, the entry check of
//! every call, and the hand-over of a closure CUDA is done with. The cells are one file each, a
//! row of the ownership table in `lib.rs` each: [`crate::once`] (a stream's one-shot closure),
//! [`crate::guarded`] (one with a sync mode), [`crate::shared`] (a graph's host node),
//! [`crate::arena`] (closures captured into a graph), and the updatable executable's store
//! (`exec_update.rs`, [`crate::protocol::store`]). Whether a thread is inside a callback is
//! [`crate::inside`]'s; what callbacks leave to a program thread, the reaper's.
//!
//! A trampoline is the `extern "C"` function CUDA calls with the boxed closure as user data. It
//! marks the thread as inside a callback, catches any panic (reported through
//! [`crate::panic`]), and never unwinds into the driver. No trampoline drops a closure: each
//! hands it to the reaper ([`crate::reaper`]), which drops it on a program thread.

use std::ffi::c_void;

use crate::Error;
use crate::inside::in_callback;
use crate::reaper;

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

#[cfg(test)]
mod tests {
    //! The trampolines of the cells (`once.rs`, `guarded.rs`, `shared.rs`) are called here
    //! exactly as CUDA calls them: an `extern "C"` function with the boxed closure as its user
    //! data.

    use super::*;
    use crate::guarded::*;
    use crate::inside::Inside;
    use crate::once::*;
    use crate::panic::PanicStage;
    use crate::panic::take_panic_hook;
    use crate::panic::tests::{HOOK_LOCK, recording_hook};
    use crate::reaper::{deferred, destroy};
    use crate::shared::*;
    use crate::sticky::Book;
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::{AtomicBool, Ordering};

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
