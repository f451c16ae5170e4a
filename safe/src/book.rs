//! A stream's book of skipped host functions ([`crate::sticky`]) and its protocol with CUDA's
//! callbacks: model-checked with loom (`cargo xtask loom`, `tests/loom`), which compiles this
//! file.
//!
//! Every one-shot closure enqueued on a stream holds a reference to the stream's book until CUDA
//! has made its callback. The callback records a skip, hands its closure over and releases its
//! reference, in that order ([`Book::close`]); a synchronisation that waits until it holds the
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

    /// The end of a callback: records a skip with `skipped` (the status CUDA passed, when the
    /// closure was not called), runs `hand_over` (the closure to the reaper), and releases the
    /// callback's reference to the book, last, so that a synchronisation that sees the
    /// reference gone sees the skip and the closure handed over.
    #[inline(always)]
    pub(crate) fn close(book: Arc<Book>, skipped: Option<u32>, hand_over: impl FnOnce()) {
        if let Some(status) = skipped {
            book.skip(status);
        }
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
