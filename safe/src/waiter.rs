//! What a completion future shares with whoever finds its work done, and the waiter: a thread of
//! this crate that watches the completions still pending after their spin (see
//! `completion.rs`), without spinning itself.
//!
//! A future first checks its event on the awaiting task, as a blocking wait checks on the
//! waiting thread; if the work is not done within [`COMPLETION_SPIN`] of its first poll, it hands the
//! event to the waiter and sleeps until woken. The waiter asks each pending event once per sweep
//! (`cuEventQuery`, on this thread, never on one of CUDA's), then sleeps for a time that doubles
//! from [`FIRST_PAUSE`](crate::protocol::signal::FIRST_PAUSE) to
//! [`LAST_PAUSE`](crate::protocol::signal::LAST_PAUSE) while nothing resolves, and parks without a
//! time-out while nothing is pending. A future dropped after the hand-over is forgotten at the
//! next sweep (its event destroyed there); one dropped before costs nothing at all. The
//! protocol of the hand-over, the sweep and the wake-up is [`crate::protocol::signal`]'s.

use std::sync::{Arc, OnceLock};
use std::task::Waker;
use std::thread::{self, Thread};
use std::time::Duration;

use crate::Error;
use crate::protocol::signal::{self, Signal, Sweeper};

/// How long a future checks its work on the awaiting task (woken again at once while the work
/// is pending) before it hands the work to the waiter thread.
///
/// About what a blocking wait spends spinning on short work: a kernel or a copy of a few
/// microseconds resolves on the awaiting task, with a blocking wait's latency and CPU; longer
/// work costs at most this much of a task's time before it sleeps.
pub const COMPLETION_SPIN: Duration = Duration::from_micros(100);

/// The name of the waiter thread.
pub const WAITER_THREAD_NAME: &str = "cuda-hostcb-waiter";

/// What asking an event found: a CUDA error when it failed.
pub(crate) type Check = signal::Check<cuda_hostcb::Error>;

/// What a future and the waiter share: the outcome and the task to wake (the protocol:
/// [`crate::protocol::signal`]).
pub(crate) type Shared = Signal<cuda_hostcb::Error>;

impl Shared {
    /// The outcome, if resolved.
    #[inline]
    pub(crate) fn outcome(&self) -> Option<Result<(), Error>> {
        outcome(self.check())
    }

    /// A poll of the future ([`Signal::poll`]): the outcome, if resolved (else the waker is
    /// registered).
    #[inline]
    pub(crate) fn poll_outcome(&self, waker: &Waker) -> Option<Result<(), Error>> {
        outcome(self.poll(waker))
    }
}

fn outcome(check: Check) -> Option<Result<(), Error>> {
    match check {
        Check::Pending => None,
        Check::Done => Some(Ok(())),
        Check::Abandoned => Some(Err(Error::CompletionAbandoned)),
        Check::Failed(e) => Some(Err(Error::Cuda(e))),
    }
}

/// A pending completion's event, handed to the waiter: asked each sweep, and dropped (event
/// returned or destroyed) once resolved or forgotten, on the waiter thread.
pub(crate) trait Watch: Send {
    fn check(&mut self) -> Check;
}

/// A [`Watch`] as the sweep's.
struct AsWatch<W>(W);

impl<W: Watch> signal::Watch<cuda_hostcb::Error> for AsWatch<W> {
    fn check(&mut self) -> Check {
        self.0.check()
    }
}

/// The waiter's queue and thread (one per process).
struct Waiter {
    sweeper: Sweeper<cuda_hostcb::Error>,
    thread: OnceLock<Option<Thread>>,
}

static WAITER: Waiter = Waiter {
    sweeper: Sweeper::new(),
    thread: OnceLock::new(),
};

impl Waiter {
    fn thread(&'static self) -> Option<&'static Thread> {
        self.thread
            .get_or_init(|| {
                thread::Builder::new()
                    .name(WAITER_THREAD_NAME.to_owned())
                    .spawn(move || {
                        self.sweeper
                            .run(thread::park, thread::park_timeout, || false)
                    })
                    .ok()
                    .map(|handle| handle.thread().clone())
            })
            .as_ref()
    }
}

/// Starts the waiter thread if it is not running; whether it runs (it could not be started
/// otherwise: then the future keeps checking on its task).
pub(crate) fn start() -> bool {
    WAITER.thread().is_some()
}

/// Hands a pending completion to the waiter thread (started by [`start`]; without it the entry
/// waits until it starts).
pub(crate) fn hand_over<W: Watch + 'static>(shared: Arc<Shared>, watch: W) {
    WAITER
        .sweeper
        .hand_over(shared, Box::new(AsWatch(watch)), WAITER.thread());
}

#[cfg(test)]
mod tests {
    //! The waiter without a GPU: watches that resolve after a number of checks.

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;
    use std::time::Instant;

    struct Counting(AtomicUsize, Thread);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.unpark();
        }
    }

    /// Pending for `left` checks, then `then`; counts its checks and its drop.
    struct After {
        left: usize,
        then: Check,
        checks: Arc<AtomicUsize>,
        dropped: Arc<AtomicUsize>,
    }

    impl Watch for After {
        fn check(&mut self) -> Check {
            self.checks.fetch_add(1, Ordering::SeqCst);
            if self.left == 0 {
                return self.then;
            }
            self.left -= 1;
            Check::Pending
        }
    }

    impl Drop for After {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > limit {
                return false;
            }
            thread::park_timeout(Duration::from_millis(1));
        }
        true
    }

    /// Hands the waiter, for `shared`, a watch that is pending `left` times and then `then`;
    /// its (checks, drops) counters.
    fn hand_over_after(
        shared: &Arc<Shared>,
        left: usize,
        then: Check,
    ) -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (checks, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let watch = After {
            left,
            then,
            checks: Arc::clone(&checks),
            dropped: Arc::clone(&dropped),
        };
        assert!(start());
        hand_over(Arc::clone(shared), watch);
        (checks, dropped)
    }

    #[test]
    fn the_waiter_resolves_wakes_once_and_drops_the_watch() {
        let shared = Arc::new(Shared::default());
        let counting = Arc::new(Counting(AtomicUsize::new(0), thread::current()));
        shared.register(&Waker::from(Arc::clone(&counting)));
        let (checks, dropped) = hand_over_after(&shared, 5, Check::Done);
        assert!(wait_until(Duration::from_secs(10), || shared
            .outcome()
            .is_some()));
        assert!(matches!(shared.outcome(), Some(Ok(()))));
        assert!(wait_until(Duration::from_secs(10), || dropped
            .load(Ordering::SeqCst)
            == 1));
        assert_eq!(checks.load(Ordering::SeqCst), 6);
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_abandoned_or_failed_watch_resolves_to_an_error() {
        for (then, abandoned) in [
            (Check::Abandoned, true),
            (
                Check::Failed(cuda_hostcb::Error::Cuda {
                    api: cuda_hostcb::error::Api::Driver,
                    function: "cuEventQuery",
                    code: 1,
                }),
                false,
            ),
        ] {
            let shared = Arc::new(Shared::default());
            hand_over_after(&shared, 1, then);
            assert!(wait_until(Duration::from_secs(10), || shared
                .outcome()
                .is_some()));
            match shared.outcome() {
                Some(Err(Error::CompletionAbandoned)) => assert!(abandoned),
                Some(Err(Error::Cuda(e))) => {
                    assert!(!abandoned);
                    assert_eq!(e.code(), Some(1));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_dropped_future_is_forgotten_without_another_check() {
        let shared = Arc::new(Shared::default());
        let (checks, dropped) = hand_over_after(&shared, usize::MAX, Check::Done);
        assert!(wait_until(Duration::from_secs(10), || checks
            .load(Ordering::SeqCst)
            > 0));
        drop(shared);
        assert!(wait_until(Duration::from_secs(10), || dropped
            .load(Ordering::SeqCst)
            == 1));
        let seen = checks.load(Ordering::SeqCst);
        thread::sleep(Duration::from_millis(20));
        assert_eq!(
            checks.load(Ordering::SeqCst),
            seen,
            "checked after it was forgotten"
        );
    }
}
