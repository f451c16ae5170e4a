//! Host functions that CUDA skips after a context error, and how the safe layer reports them.
//!
//! Once a context has hit a device error (a kernel that traps, an illegal address), CUDA calls
//! no host function any more: a function enqueued with `cuLaunchHostFunc` is neither called nor
//! released, so a closure behind it would be leaked and anything waiting for it would wait
//! forever. The safe layer therefore enqueues its one-shot stream closures with
//! `cuStreamAddCallback`, whose callback CUDA calls exactly once either way: with
//! `CUDA_SUCCESS` (the closure runs) or with the error (the closure is dropped uncalled). Each
//! [`Stream`](crate) keeps a [`Book`] of the closures skipped so, which its next `synchronize`
//! reports as [`Error::HostFunctionsSkipped`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Error;
pub(crate) use crate::protocol::book::Book;

/// How long a failed synchronisation waits for CUDA to make the stream's remaining callbacks
/// (with the error), so that the count it reports is whole.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// Whether a CUDA error leaves the context unusable, so that CUDA skips every host function
/// after it: the codes `cuda.h` documents as leaving "the process in an inconsistent state"
/// (and `CUDA_ERROR_ASSERT`, after which "the context cannot be used anymore").
pub(crate) const fn leaves_context_unusable(code: u32) -> bool {
    matches!(
        code,
        // CONTAINED, ILLEGAL_ADDRESS, LAUNCH_TIMEOUT, ASSERT, HARDWARE_STACK_ERROR,
        // ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE, INVALID_PC,
        // LAUNCH_FAILED, EXTERNAL_DEVICE
        226 | 700 | 702 | 710 | 714..=719 | 911
    )
}

/// The sticky codes above, which `stream.rs` checks against the bindings' constants.
pub(crate) const STICKY: [u32; 11] = [226, 700, 702, 710, 714, 715, 716, 717, 718, 719, 911];

/// The outcome of a stream synchronisation (`result`, of `cuStreamSynchronize`), with the
/// stream's skipped callbacks, if any, reported (and cleared): after an error that leaves the
/// context unusable, it first waits up to [`SETTLE`] until CUDA has made every callback of the
/// stream's one-shot closures.
#[cold]
#[inline(never)]
pub(crate) fn report(
    book: &Arc<Book>,
    result: Result<(), cuda_hostcb::Error>,
) -> Result<(), Error> {
    if let Err(e) = result
        && e.code().is_some_and(leaves_context_unusable)
    {
        settle(book);
    }
    let (skipped, status) = book.take();
    if skipped == 0 {
        return Ok(result?);
    }
    let skipped = u32::try_from(skipped).unwrap_or(u32::MAX);
    let source = match result {
        Err(e) => e,
        Ok(()) => cuda_hostcb::Error::Cuda {
            api: cuda_hostcb::error::Api::Driver,
            function: "cuStreamAddCallback",
            code: status,
        },
    };
    Err(Error::HostFunctionsSkipped {
        skipped,
        status,
        source,
    })
}

/// Waits up to [`SETTLE`] until no one-shot closure of the stream waits for its callback.
fn settle(book: &Arc<Book>) {
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    Book::settle(book, || {
        if start.elapsed() >= SETTLE {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_are_reported_once_with_the_error_that_caused_them() {
        let book = Arc::new(Book::default());
        assert!(report(&book, Ok(())).is_ok());
        book.skip(719);
        book.skip(719);
        assert!(book.any());
        let failed = cuda_hostcb::Error::Cuda {
            api: cuda_hostcb::error::Api::Driver,
            function: "cuStreamSynchronize",
            code: 719,
        };
        let e = report(&book, Err(failed)).unwrap_err();
        assert!(
            matches!(e, Error::HostFunctionsSkipped { skipped: 2, status: 719, source } if source == failed),
            "{e:?}"
        );
        assert_eq!(e.code(), Some(719));
        assert!(!book.any());
        // Reported once: the next synchronisation returns the plain error.
        assert!(matches!(report(&book, Err(failed)), Err(Error::Cuda(f)) if f == failed));
    }

    #[test]
    fn a_failed_synchronisation_waits_for_the_callbacks_still_due() {
        let book = Arc::new(Book::default());
        let pending = Arc::clone(&book);
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            pending.skip(719);
            drop(pending);
        });
        let failed = cuda_hostcb::Error::Cuda {
            api: cuda_hostcb::error::Api::Driver,
            function: "cuStreamSynchronize",
            code: 719,
        };
        let e = report(&book, Err(failed)).unwrap_err();
        late.join().unwrap();
        assert!(
            matches!(e, Error::HostFunctionsSkipped { skipped: 1, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn only_the_codes_that_end_a_context_are_sticky() {
        for code in STICKY {
            assert!(leaves_context_unusable(code), "{code}");
        }
        for code in [0, 1, 2, 400, 600, 900, 901, 999] {
            assert!(!leaves_context_unusable(code), "{code}");
        }
    }
}
