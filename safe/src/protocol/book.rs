//! A stream's book of skipped host functions ([`crate::sticky`]) and its protocol with CUDA's
//! callbacks: model-checked with loom (`cargo xtask loom`, `tests/loom`), which compiles this
//! file.
//!
//! Every one-shot closure enqueued on a stream holds a reference to the stream's book until CUDA
//! has made its callback. The callback runs its closure or records a skip, hands the closure
//! over and releases its reference, in that order ([`Book::close`]); a synchronisation that waits until it holds the
//! only reference ([`Book::settle`]) then sees every skip of those callbacks and takes them
//! ([`Book::take`]).

use crate::sync::Arc;
use crate::sync::atomic::{AtomicU32, AtomicUsize, Ordering, fence};

/// What a stream's skipped callbacks left: how many, and the status CUDA passed the first.
///
/// The book's reference count, less the stream's own, is the number of callbacks CUDA has not
/// made yet.
#[derive(Debug, Default)]
pub(crate) struct Book {
    skipped: AtomicUsize,
    status: AtomicU32,
}

impl Book {
    /// Records a callback that CUDA made with `status` (not success): its closure was not
    /// called. Runs on CUDA's thread.
    #[cold]
    #[inline(never)]
    pub(crate) fn skip(&self, status: u32) {
        let _ = self
            .status
            .compare_exchange(0, status, Ordering::Relaxed, Ordering::Relaxed);
        self.skipped.fetch_add(1, Ordering::Release);
    }

    /// Whether skipped callbacks wait to be reported.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.skipped.load(Ordering::Relaxed) != 0
    }

    /// A callback's use of its stream's book, in order: `body` (which runs the closure, or
    /// records its skip in the book), then `hand_over` (the closure to the reaper), and last the
    /// release of the callback's reference, so that a synchronisation that sees the reference
    /// gone sees the skip and the closure handed over.
    #[inline(always)]
    pub(crate) fn close(book: Arc<Book>, body: impl FnOnce(&Book), hand_over: impl FnOnce()) {
        body(&book);
        hand_over();
        drop(book);
    }

    /// Waits, while `wait` (which pauses) returns true, until no callback holds `book` any more;
    /// whether none does.
    pub(crate) fn settle(book: &Arc<Book>, mut wait: impl FnMut() -> bool) -> bool {
        let mut settled = Arc::strong_count(book) == 1;
        while !settled && wait() {
            settled = Arc::strong_count(book) == 1;
        }
        // The callbacks' writes to the book happen before their release of it.
        fence(Ordering::Acquire);
        settled
    }

    /// Takes the skips recorded so far: how many, and the status of the first (0 if none).
    pub(crate) fn take(&self) -> (usize, u32) {
        let skipped = self.skipped.swap(0, Ordering::Acquire);
        if skipped == 0 {
            return (0, 0);
        }
        (skipped, self.status.swap(0, Ordering::Relaxed))
    }
}
