//! A stream's completion as a [`Future`]: an event recorded after the work, checked on the
//! awaiting task for a short while (as a blocking wait spins), then by the waiter thread of this
//! crate, which sleeps between checks. Any executor can await it (the crate depends on none).
//!
//! # Why this design
//!
//! Three designs were measured side by side on an H200 (driver 13.0) by the completion bench
//! (`bench/benches/completion.rs`), after a memset, a kernel and a graph launch, on 1 stream and
//! on 64 awaited at once, against `cuStreamSynchronize`:
//!
//! - a host callback that signals (`cuStreamAddCallback`; this crate's first design): a host
//!   function's own latency is about 15 µs there, so the future waited about 3.8× as long as
//!   `cuStreamSynchronize` and used about 6× its CPU; the callback also delays the stream's
//!   later work by as much;
//! - a waiter thread blocking on a blocking-sync event (`CU_EVENT_BLOCKING_SYNC`,
//!   `cuEventSynchronize`): no spinning at all, but the interrupt-driven wake of the waiter
//!   and then the wake of the task, two thread hand-offs, cost more than the work itself;
//!   and one waiter blocked on long work delays every completion behind it;
//! - this one: an event (`cuEventRecord`, timing off, from a pool of the context) checked with
//!   `cuEventQuery` on the awaiting task, which wakes itself while the work is pending, for up
//!   to [`COMPLETION_SPIN`](crate::COMPLETION_SPIN): the same wait a blocking
//!   `cuStreamSynchronize` makes (it spins on the calling thread under the default
//!   scheduling), with no hand-off between threads, so latency and CPU stay those of the
//!   blocking wait (within 1.01-1.1× on one stream; `docs/async.md` has the tables). Work still pending after that goes to the
//!   waiter thread, which checks every pending event per sweep and sleeps between sweeps (20 µs
//!   doubling to 1 ms), and parks while nothing is pending: long work costs no executor thread.
//!
//! The guarantees: after a context error `cuEventQuery` returns that error, so the future
//! resolves ([`Error::CompletionAbandoned`]) and never hangs; no CUDA call runs on a CUDA thread
//! (the checks run on the task's thread or the waiter's, the wake too); a future dropped before
//! its hand-over only returns its event, one dropped after is forgotten at the waiter's next
//! sweep.

use std::future::Future;
use std::ptr;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use crate::callback;
use crate::reaper::{self, Handle};
use crate::sticky::leaves_context_unusable;
use crate::waiter::{self, Check, Shared, Watch};
use crate::{CaptureStatus, Error};
use crate::{Context, Stream, sys};

/// `CUDA_ERROR_NOT_READY`: the event's work is pending.
const NOT_READY: u32 = sys::CUresult::CUDA_ERROR_NOT_READY.0;
/// `CUDA_ERROR_INVALID_CONTEXT`: the calling thread has no (or another) current context.
const INVALID_CONTEXT: u32 = sys::CUresult::CUDA_ERROR_INVALID_CONTEXT.0;

/// Whose context an event lives in: a handle that keeps it alive (and pools its events), or a
/// borrowed stream's raw context.
#[derive(Debug)]
enum Owner {
    Context(Context),
    Raw(sys::CUcontext),
}

impl Owner {
    fn raw(&self) -> sys::CUcontext {
        match self {
            Owner::Context(ctx) => ctx.as_raw(),
            Owner::Raw(raw) => *raw,
        }
    }
}

/// An event recorded after a stream's work; returned to its context's pool once known done, or
/// destroyed, when dropped.
#[derive(Debug)]
struct Mark {
    event: sys::CUevent,
    owner: Owner,
    /// `cuEventQuery` returned success: the event may be recorded again.
    done: bool,
}

// SAFETY: an event may be queried and destroyed from any thread; a `Mark` is used by one
// thread at a time (the future's, then the waiter's).
unsafe impl Send for Mark {}
// SAFETY: `&Mark` only queries the event.
unsafe impl Sync for Mark {}

impl Mark {
    /// `cuEventQuery`, with the event's context made current first if this thread's current
    /// context is not it (a task polled on an executor's thread, the waiter thread).
    fn check(&self) -> Check {
        // SAFETY: the event is valid while `self` lives.
        let first = unsafe { sys::cuEventQuery(self.event) };
        let result = match first {
            Err(e) if e.code() == Some(INVALID_CONTEXT) => {
                // SAFETY: the context outlives the event (see `Owner`); popped at once.
                unsafe {
                    if sys::cuCtxPushCurrent(self.owner.raw()).is_err() {
                        return Check::Failed(e);
                    }
                    let result = sys::cuEventQuery(self.event);
                    let mut popped: sys::CUcontext = ptr::null_mut();
                    let _ = sys::cuCtxPopCurrent(&mut popped);
                    result
                }
            }
            other => other,
        };
        match result {
            Ok(()) => Check::Done,
            Err(e) => match e.code() {
                Some(NOT_READY) => Check::Pending,
                Some(code) if leaves_context_unusable(code) => Check::Abandoned,
                _ => Check::Failed(e),
            },
        }
    }
}

impl Watch for Mark {
    fn check(&mut self) -> Check {
        let outcome = Mark::check(self);
        self.done = outcome == Check::Done;
        outcome
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        if self.done
            && let Owner::Context(ctx) = &self.owner
        {
            return ctx.return_event(self.event);
        }
        self.destroy_event();
    }
}

impl Mark {
    /// Destroys the event (not known done, or dropped inside a callback), with the context's
    /// retain carried into the destruction (see `crate::protocol::deferral`).
    #[cold]
    #[inline(never)]
    fn destroy_event(&mut self) {
        let (event, raw) = (Handle::new(self.event), Handle::new(self.owner.raw()));
        let retain = match std::mem::replace(&mut self.owner, Owner::Raw(ptr::null_mut())) {
            Owner::Context(ctx) => Some(ctx),
            Owner::Raw(_) => None,
        };
        reaper::destroy(retain, move || {
            let (event, raw) = (event.into_inner(), raw.into_inner());
            // SAFETY: the event is ours; its context is alive (retained until this has run, or
            // borrowed: see `Owner`). CUDA releases a pending event once its work is done.
            unsafe {
                if sys::cuCtxPushCurrent(raw).is_ok() {
                    let _ = sys::cuEventDestroy(event);
                    let mut popped: sys::CUcontext = ptr::null_mut();
                    let _ = sys::cuCtxPopCurrent(&mut popped);
                }
            }
        });
    }
}

/// The completion of the work enqueued on a stream before [`Stream::completion`] was called;
/// resolves to `Ok(())` once that work (host functions included) is done.
///
/// Polling checks an event recorded after that work (`cuEventQuery`). While the work is
/// pending, the future wakes its own task again at once, for up to [`COMPLETION_SPIN`](crate::COMPLETION_SPIN) after
/// its first poll, the way a blocking `cuStreamSynchronize` spins on its thread; then it hands
/// the event to the crate's waiter thread ([`WAITER_THREAD_NAME`](crate::WAITER_THREAD_NAME)),
/// which wakes the task when the work is done. So short work resolves with the latency and CPU
/// of a blocking wait, and long work costs the executor nothing after the first 100 µs. Wakers
/// are called on the polling thread or the waiter thread, never on one of CUDA's.
///
/// It does not borrow the stream; dropping the stream does not cancel it, since CUDA still runs
/// a destroyed stream's pending work. Dropping the future cancels nothing either, and costs
/// nothing later. It keeps the stream's context alive while it lives (a borrowed stream's
/// context must outlive it).
///
/// Once the context has hit an error that ends it (a kernel that trapped), the work before
/// will never be done: the future resolves to [`Error::CompletionAbandoned`] (the stream's
/// `synchronize` names the error). Polled inside a host function it resolves to
/// [`Error::InCallback`].
#[derive(Debug)]
#[must_use = "a completion does nothing unless awaited or polled"]
pub struct Completion {
    /// The event, until it is handed to the waiter thread.
    mark: Option<Mark>,
    /// What the future shares with the waiter, from the hand-over on (no allocation before).
    shared: Option<Arc<Shared>>,
    /// Polls so far while checking on the task; the clock is read on the first and every
    /// [`CLOCK_EVERY`]th.
    polls: u32,
    /// When the task stops checking on its own (set at the first pending poll).
    spin_until: Option<Instant>,
}

/// How often a pending poll reads the clock (64 futures joined on one task poll each other in
/// turn: a clock read each is measurable there).
const CLOCK_EVERY: u32 = 8;

impl Completion {
    /// Whether the work is done (or can never be), without registering a waker: the outcome
    /// if known, else one `cuEventQuery`.
    pub fn is_signalled(&self) -> bool {
        if let Some(shared) = &self.shared {
            return shared.outcome().is_some();
        }
        match &self.mark {
            Some(mark) if !crate::inside::in_callback() => mark.check() != Check::Pending,
            _ => false,
        }
    }
}

impl Future for Completion {
    type Output = Result<(), Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(shared) = &this.shared {
            // With the waiter: it wakes the task that registered last.
            return match shared.poll_outcome(cx.waker()) {
                Some(outcome) => Poll::Ready(outcome),
                None => Poll::Pending,
            };
        }
        let Some(mark) = this.mark.as_mut() else {
            return Poll::Ready(Err(Error::CompletionAbandoned));
        };
        if crate::inside::in_callback() {
            return Poll::Ready(Err(Error::InCallback {
                operation: "Completion::poll",
            }));
        }
        match Watch::check(mark) {
            Check::Done => return Poll::Ready(Ok(())),
            Check::Abandoned => return Poll::Ready(Err(Error::CompletionAbandoned)),
            Check::Failed(e) => return Poll::Ready(Err(Error::Cuda(e))),
            Check::Pending => {}
        }
        let polls = this.polls;
        this.polls = polls.wrapping_add(1);
        if polls.is_multiple_of(CLOCK_EVERY) {
            let now = Instant::now();
            let until = *this.spin_until.get_or_insert(now + waiter::COMPLETION_SPIN);
            // Without a waiter thread (it could not be started) the task keeps checking.
            if now >= until && waiter::start() {
                let shared = Arc::new(Shared::default());
                shared.register(cx.waker());
                if let Some(mark) = this.mark.take() {
                    waiter::hand_over(Arc::clone(&shared), mark);
                }
                this.shared = Some(shared);
                return Poll::Pending;
            }
        }
        // Checked again at once, as a blocking wait would (see the module documentation).
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Stream {
    /// A [`Completion`] of the work enqueued so far: a future that resolves once that work is
    /// done, with the latency and CPU of a blocking wait for short work and no executor time
    /// for long work (see the type's documentation).
    ///
    /// ```no_run
    /// # async fn run(stream: &cuda_hostcb_safe::Stream) -> Result<(), cuda_hostcb_safe::Error> {
    /// // ... enqueue work on `stream` ...
    /// stream.completion()?.await?; // the work before is done
    /// # Ok(()) }
    /// ```
    ///
    /// A stream that is capturing a graph returns [`Error::CapturingStream`] (a captured event
    /// record would belong to the graph, not to this moment of the stream).
    pub fn completion(&self) -> Result<Completion, Error> {
        callback::enter("Stream::completion")?;
        match self.status()? {
            CaptureStatus::None => {}
            CaptureStatus::Active => return Err(Error::CapturingStream),
            CaptureStatus::Invalidated => return Err(Error::CaptureInvalidated),
        }
        let owner = match self.context() {
            Some(ctx) => Owner::Context(ctx.clone()),
            None => {
                let mut raw: sys::CUcontext = ptr::null_mut();
                // SAFETY: the stream is valid; a valid out-pointer.
                unsafe { sys::cuStreamGetCtx(self.as_raw(), &mut raw)? };
                Owner::Raw(raw)
            }
        };
        let event = match &owner {
            Owner::Context(ctx) => ctx.take_event()?,
            Owner::Raw(raw) => new_event(*raw)?,
        };
        // Destroyed (not pooled) if the record fails: `done` is false.
        let mark = Mark {
            event,
            owner,
            done: false,
        };
        // SAFETY: the event and the stream are valid and of the same context.
        unsafe { sys::cuEventRecord(mark.event, self.as_raw())? };
        Ok(Completion {
            mark: Some(mark),
            shared: None,
            polls: 0,
            spin_until: None,
        })
    }
}

/// A new event for completions in context `ctx`: timing off (cheaper to record and to query).
pub(super) fn new_event(ctx: sys::CUcontext) -> Result<sys::CUevent, Error> {
    let mut event: sys::CUevent = ptr::null_mut();
    let mut popped: sys::CUcontext = ptr::null_mut();
    // SAFETY: a valid context (the caller's) made current for the call, and popped again; a
    // valid out-pointer.
    unsafe {
        sys::cuCtxPushCurrent(ctx)?;
        let made = sys::cuEventCreate(&mut event, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0);
        let _ = sys::cuCtxPopCurrent(&mut popped);
        made?;
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    //! The future's protocol with the waiter, without a GPU: the outcome is resolved by hand, as
    //! the waiter would, before or after the task polls.

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A completion already handed to the waiter (no event), its shared state and a waker.
    fn handed_over() -> (Completion, Arc<Shared>, Arc<CountingWaker>, Waker) {
        let shared = Arc::new(Shared::default());
        let counting = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counting));
        (
            Completion {
                mark: None,
                shared: Some(Arc::clone(&shared)),
                polls: 0,
                spin_until: None,
            },
            shared,
            counting,
            waker,
        )
    }

    fn poll(c: &mut Completion, waker: &Waker) -> Poll<Result<(), Error>> {
        std::pin::Pin::new(c).poll(&mut TaskContext::from_waker(waker))
    }

    #[test]
    fn pending_until_resolved_then_woken_once() {
        let (mut c, shared, counting, waker) = handed_over();
        assert!(poll(&mut c, &waker).is_pending());
        assert!(poll(&mut c, &waker).is_pending());
        assert_eq!(counting.0.load(Ordering::SeqCst), 0);
        shared.resolve(Check::Done);
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert!(matches!(poll(&mut c, &waker), Poll::Ready(Ok(()))));
    }

    #[test]
    fn ready_at_once_when_resolved_before_the_first_poll() {
        let (mut c, shared, counting, waker) = handed_over();
        shared.resolve(Check::Done);
        assert!(c.is_signalled());
        assert!(matches!(poll(&mut c, &waker), Poll::Ready(Ok(()))));
        assert_eq!(
            counting.0.load(Ordering::SeqCst),
            0,
            "no waker was registered"
        );
    }

    #[test]
    fn a_context_error_resolves_to_abandoned() {
        let (mut c, shared, counting, waker) = handed_over();
        assert!(poll(&mut c, &waker).is_pending());
        shared.resolve(Check::Abandoned);
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll(&mut c, &waker),
            Poll::Ready(Err(Error::CompletionAbandoned))
        ));
    }
}
