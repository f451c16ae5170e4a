//! What a completion future shares with whoever finds its work done, and the waiter: a thread of
//! this crate that watches the completions still pending after their spin (see
//! `target/completion.rs`), without spinning itself.
//!
//! A future first checks its event on the awaiting task, as a blocking wait checks on the
//! waiting thread; if the work is not done within [`COMPLETION_SPIN`] of its first poll, it hands the
//! event to the waiter and sleeps until woken. The waiter asks each pending event once per sweep
//! (`cuEventQuery`, on this thread, never on one of CUDA's), then sleeps for a time that doubles
//! from [`FIRST_PAUSE`] to [`LAST_PAUSE`] while nothing resolves, and parks without a time-out
//! while nothing is pending. A future dropped after the hand-over is forgotten at the next sweep
//! (its event destroyed there); one dropped before costs nothing at all.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::thread::{self, Thread};
use std::time::Duration;

use crate::Error;

/// How long a future checks its work on the awaiting task (woken again at once while the work
/// is pending) before it hands the work to the waiter thread.
///
/// About what a blocking wait spends spinning on short work: a kernel or a copy of a few
/// microseconds resolves on the awaiting task, with a blocking wait's latency and CPU; longer
/// work costs at most this much of a task's time before it sleeps.
pub const COMPLETION_SPIN: Duration = Duration::from_micros(100);

/// The waiter's first pause after a sweep that left work pending.
pub(crate) const FIRST_PAUSE: Duration = Duration::from_micros(20);

/// The waiter's longest pause: the most a completion handed over may resolve late.
pub(crate) const LAST_PAUSE: Duration = Duration::from_millis(1);

/// The name of the waiter thread.
pub const WAITER_THREAD_NAME: &str = "cuda-hostcb-waiter";

/// Not resolved yet.
pub(crate) const PENDING: u8 = 0;
/// The work is done.
pub(crate) const DONE: u8 = 1;
/// The context hit an error that ends it: the work will never be done.
pub(crate) const ABANDONED: u8 = 2;
/// The event could not be asked (not a context error): see [`Shared::failure`].
pub(crate) const FAILED: u8 = 3;

/// What a future and the waiter share: the outcome and the task to wake.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
    failure: Mutex<Option<cuda_hostcb::Error>>,
}

impl Shared {
    fn lock_waker(&self) -> MutexGuard<'_, Option<Waker>> {
        self.waker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The outcome, if resolved.
    #[inline]
    pub(crate) fn outcome(&self) -> Option<Result<(), Error>> {
        match self.state.load(Ordering::Acquire) {
            PENDING => None,
            DONE => Some(Ok(())),
            ABANDONED => Some(Err(Error::CompletionAbandoned)),
            _ => {
                let failure = *self.failure.lock().unwrap_or_else(|e| e.into_inner());
                Some(Err(failure.map_or(Error::CompletionAbandoned, Error::Cuda)))
            }
        }
    }

    /// Stores the waker of the task that polls (unless it is the one stored already).
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = self.lock_waker();
        match &mut *slot {
            Some(w) if w.will_wake(waker) => {}
            other => *other = Some(waker.clone()),
        }
    }

    /// Records the outcome and wakes the task that last registered, if any.
    pub(crate) fn resolve(&self, outcome: Check) {
        let state = match outcome {
            Check::Pending => return,
            Check::Done => DONE,
            Check::Abandoned => ABANDONED,
            Check::Failed(e) => {
                *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                FAILED
            }
        };
        self.state.store(state, Ordering::Release);
        let waker = self.lock_waker().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// What asking an event found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Not done yet.
    Pending,
    /// Done.
    Done,
    /// The context hit an error that ends it (the work before will never be done).
    Abandoned,
    /// Another error.
    Failed(cuda_hostcb::Error),
}

/// A pending completion's event, handed to the waiter: asked each sweep, and dropped (event
/// returned or destroyed) once resolved or forgotten, on the waiter thread.
pub(crate) trait Watch: Send {
    fn check(&mut self) -> Check;
}

struct Entry {
    shared: Arc<Shared>,
    watch: Box<dyn Watch>,
}

/// The waiter's queue and thread (one per process).
struct Waiter {
    incoming: Mutex<Vec<Entry>>,
    thread: OnceLock<Option<Thread>>,
}

static WAITER: Waiter = Waiter {
    incoming: Mutex::new(Vec::new()),
    thread: OnceLock::new(),
};

impl Waiter {
    fn thread(&'static self) -> Option<&'static Thread> {
        self.thread
            .get_or_init(|| {
                thread::Builder::new()
                    .name(WAITER_THREAD_NAME.to_owned())
                    .spawn(move || self.run())
                    .ok()
                    .map(|handle| handle.thread().clone())
            })
            .as_ref()
    }

    fn take_incoming(&self, into: &mut Vec<Entry>) {
        let mut incoming = self.incoming.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut incoming);
    }

    /// The loop: sweep what is pending; pause (longer each time nothing resolved) while
    /// something is, park while nothing is.
    fn run(&self) {
        let mut pending: Vec<Entry> = Vec::new();
        let mut pause = FIRST_PAUSE;
        loop {
            let before = pending.len();
            self.take_incoming(&mut pending);
            if pending.len() > before {
                pause = FIRST_PAUSE;
            }
            if pending.is_empty() {
                // A hand-over after the check above unparks: the token makes this return.
                thread::park();
                continue;
            }
            let mut resolved = false;
            pending.retain_mut(|entry| {
                // Only the waiter holds the outcome: the future was dropped; forget it.
                if Arc::strong_count(&entry.shared) == 1 {
                    return false;
                }
                match entry.watch.check() {
                    Check::Pending => true,
                    outcome => {
                        entry.shared.resolve(outcome);
                        resolved = true;
                        false
                    }
                }
            });
            if pending.is_empty() {
                continue;
            }
            if resolved {
                pause = FIRST_PAUSE;
            }
            thread::park_timeout(pause);
            pause = (pause * 2).min(LAST_PAUSE);
        }
    }
}

/// Starts the waiter thread if it is not running; whether it runs (it could not be started
/// otherwise: then the future keeps checking on its task).
pub(crate) fn start() -> bool {
    WAITER.thread().is_some()
}

/// Hands a pending completion to the waiter thread (started by [`start`]; without it the entry
/// waits until it starts).
pub(crate) fn hand_over(shared: Arc<Shared>, watch: Box<dyn Watch>) {
    WAITER
        .incoming
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Entry { shared, watch });
    if let Some(thread) = WAITER.thread() {
        thread.unpark();
    }
}

#[cfg(test)]
mod tests {
    //! The waiter without a GPU: watches that resolve after a number of checks.

    use super::*;
    use std::sync::atomic::AtomicUsize;
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
        hand_over(Arc::clone(shared), Box::new(watch));
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
