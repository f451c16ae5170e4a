//! A stream's completion as a [`Future`]: a host function enqueued on the stream wakes it, so no
//! thread polls; any executor can await it (the crate depends on none).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};

use super::Stream;
use crate::Error;

/// Not signalled yet.
const PENDING: u8 = 0;
/// The host function ran: the work before it is done.
const DONE: u8 = 1;
/// The host function was dropped without being called.
const ABANDONED: u8 = 2;

/// What the future and its host function share.
#[derive(Debug, Default)]
struct Signal {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    /// Records the outcome and wakes the task that last polled, if any. Runs on CUDA's thread
    /// (or wherever the host function is dropped); the waker's `wake` runs there too.
    fn set(&self, outcome: u8) {
        if self
            .state
            .compare_exchange(PENDING, outcome, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Signals on its call, and, if it is dropped uncalled, signals that it was abandoned.
struct Notify(Arc<Signal>);

impl Notify {
    fn fire(&self) {
        self.0.set(DONE);
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        // After `fire` this finds the state set and does nothing.
        self.0.set(ABANDONED);
    }
}

/// The completion of the work enqueued on a stream before [`Stream::completion`] was called;
/// resolves to `Ok(())` once that work (host functions included) is done.
///
/// It is woken by a host function that the stream runs after that work: CUDA's thread calls the
/// task's [`Waker`], so the waker must not call CUDA (executors' wakers only queue the task or
/// unpark a thread). It does not borrow the stream; dropping the stream does not cancel it, since
/// CUDA still runs a destroyed stream's pending work. Dropping the future cancels nothing either.
///
/// It resolves to [`Error::CompletionAbandoned`] if CUDA skips the host function: once the
/// context has hit an error CUDA calls its callback with that error instead, and the closure is
/// dropped uncalled (on the reaper thread, which then wakes the task); the stream's
/// `synchronize` names the error.
#[derive(Debug)]
#[must_use = "a completion does nothing unless awaited or polled"]
pub struct Completion {
    signal: Arc<Signal>,
}

impl Completion {
    /// Whether the host function has signalled (completed or abandoned), without registering a
    /// waker.
    pub fn is_signalled(&self) -> bool {
        self.signal.state.load(Ordering::Acquire) != PENDING
    }

    fn outcome(&self) -> Option<Result<(), Error>> {
        match self.signal.state.load(Ordering::Acquire) {
            PENDING => None,
            DONE => Some(Ok(())),
            _ => Some(Err(Error::CompletionAbandoned)),
        }
    }
}

impl Future for Completion {
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        if let Some(outcome) = self.outcome() {
            return Poll::Ready(outcome);
        }
        {
            let mut slot = self.signal.waker.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *slot {
                Some(w) if w.will_wake(cx.waker()) => {}
                other => *other = Some(cx.waker().clone()),
            }
        }
        // The host function may have run between the first check and storing the waker; it then
        // found no waker to wake, so look again.
        match self.outcome() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

impl Stream {
    /// A [`Completion`] of the work enqueued so far: a future woken by a host function that
    /// the stream runs after that work (one [`Stream::launch`], a `cuStreamAddCallback`; no
    /// thread polls).
    ///
    /// ```no_run
    /// # async fn run(stream: &cuda_hostcb_safe::ctk_13_0::Stream) -> Result<(), cuda_hostcb_safe::Error> {
    /// // ... enqueue work on `stream` ...
    /// stream.completion()?.await?; // the work before is done
    /// # Ok(()) }
    /// ```
    ///
    /// A stream that is capturing a graph returns [`Error::CapturingStream`] (a captured host
    /// function would signal once per graph launch, not once).
    pub fn completion(&self) -> Result<Completion, Error> {
        let signal = Arc::new(Signal::default());
        let notify = Notify(Arc::clone(&signal));
        self.launch(move || notify.fire())?;
        Ok(Completion { signal })
    }
}

#[cfg(test)]
mod tests {
    //! The future's protocol without a GPU: the host function is called (or dropped) by hand, as
    //! CUDA would, before or after the task polls.

    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn parts() -> (Completion, Notify, Arc<CountingWaker>, Waker) {
        let signal = Arc::new(Signal::default());
        let counting = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counting));
        (
            Completion {
                signal: Arc::clone(&signal),
            },
            Notify(signal),
            counting,
            waker,
        )
    }

    fn poll(c: &mut Completion, waker: &Waker) -> Poll<Result<(), Error>> {
        Pin::new(c).poll(&mut TaskContext::from_waker(waker))
    }

    #[test]
    fn pending_until_the_host_function_runs_then_woken_once() {
        let (mut c, notify, counting, waker) = parts();
        assert!(poll(&mut c, &waker).is_pending());
        assert!(poll(&mut c, &waker).is_pending());
        assert_eq!(counting.0.load(Ordering::SeqCst), 0);
        notify.fire();
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert!(matches!(poll(&mut c, &waker), Poll::Ready(Ok(()))));
    }

    #[test]
    fn ready_at_once_when_the_host_function_ran_before_the_first_poll() {
        let (mut c, notify, counting, waker) = parts();
        notify.fire();
        assert!(c.is_signalled());
        assert!(matches!(poll(&mut c, &waker), Poll::Ready(Ok(()))));
        assert_eq!(counting.0.load(Ordering::SeqCst), 0, "no waker was registered");
    }

    #[test]
    fn a_host_function_dropped_uncalled_resolves_to_an_error() {
        let (mut c, notify, counting, waker) = parts();
        assert!(poll(&mut c, &waker).is_pending());
        drop(notify);
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll(&mut c, &waker),
            Poll::Ready(Err(Error::CompletionAbandoned))
        ));
    }
}
