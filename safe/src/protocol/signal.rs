//! What a completion future shares with the waiter thread that finds its work done, and the
//! waiter's sweep ([`crate::waiter`]): model-checked with loom (`cargo xtask loom`,
//! `tests/loom`), which compiles this file. `F` is what a failed check carries (the safe layer's
//! `cuda_hostcb::Error`).
//!
//! - A future polls by checking the outcome, registering its waker, and checking again
//!   ([`Signal::poll`]); the waiter stores the outcome before it takes the waker
//!   ([`Signal::resolve`]). So either the second check sees the outcome or the waiter wakes the
//!   waker registered before it, and no wake-up is lost.
//! - A hand-over ([`Sweeper::hand_over`]) pushes under the lock, then unparks the waiter, whose
//!   loop ([`Sweeper::run`]) parks only after a look at the hand-overs found none (the park
//!   token makes a `park` after an `unpark` return). A future dropped after its hand-over leaves
//!   the waiter the only holder of its [`Signal`]: the next sweep forgets it without a check.

use std::task::Waker;
use std::time::Duration;

use crate::sync::atomic::{AtomicU8, Ordering};
use crate::sync::thread::Thread;
use crate::sync::{Arc, Mutex, MutexGuard, const_fn};

/// The waiter's first pause after a sweep that left work pending.
pub(crate) const FIRST_PAUSE: Duration = Duration::from_micros(20);

/// The waiter's longest pause: the most a completion handed over may resolve late.
pub(crate) const LAST_PAUSE: Duration = Duration::from_millis(1);

/// Not resolved yet.
const PENDING: u8 = 0;
/// The work is done.
const DONE: u8 = 1;
/// The context hit an error that ends it: the work will never be done.
const ABANDONED: u8 = 2;
/// The event could not be asked (not a context error): see [`Signal::check`].
const FAILED: u8 = 3;

/// What asking an event found, or what a [`Signal`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check<F> {
    /// Not done yet.
    Pending,
    /// Done.
    Done,
    /// The context hit an error that ends it (the work before will never be done).
    Abandoned,
    /// Another error.
    Failed(F),
}

/// The outcome of a completion handed to the waiter, and the task to wake.
pub(crate) struct Signal<F> {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
    failure: Mutex<Option<F>>,
}

impl<F> Default for Signal<F> {
    fn default() -> Self {
        Signal {
            state: AtomicU8::new(PENDING),
            waker: Mutex::new(None),
            failure: Mutex::new(None),
        }
    }
}

impl<F> std::fmt::Debug for Signal<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signal")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<F: Copy> Signal<F> {
    fn lock_waker(&self) -> MutexGuard<'_, Option<Waker>> {
        self.waker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The outcome ([`Check::Pending`] while unresolved; a failure whose error is lost reads
    /// as [`Check::Abandoned`]).
    #[inline]
    pub(crate) fn check(&self) -> Check<F> {
        match self.state.load(Ordering::Acquire) {
            PENDING => Check::Pending,
            DONE => Check::Done,
            ABANDONED => Check::Abandoned,
            _ => match *self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(failure) => Check::Failed(failure),
                None => Check::Abandoned,
            },
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

    /// A poll of the future: the outcome if resolved; else `waker` is registered, and the
    /// outcome checked again (it may have resolved between the first check and the
    /// registration).
    #[inline]
    pub(crate) fn poll(&self, waker: &Waker) -> Check<F> {
        match self.check() {
            Check::Pending => {}
            outcome => return outcome,
        }
        self.register(waker);
        self.check()
    }

    /// Records the outcome and wakes the task that last registered, if any.
    pub(crate) fn resolve(&self, outcome: Check<F>) {
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

/// A pending completion's event, handed to the waiter: asked each sweep, and dropped (event
/// returned or destroyed) once resolved or forgotten, on the waiter thread.
pub(crate) trait Watch<F>: Send {
    fn check(&mut self) -> Check<F>;
}

struct Entry<F> {
    shared: Arc<Signal<F>>,
    watch: Box<dyn Watch<F>>,
}

/// The hand-overs to the waiter thread, and its loop.
pub(crate) struct Sweeper<F> {
    incoming: Mutex<Vec<Entry<F>>>,
}

impl<F: Copy> Sweeper<F> {
    const_fn! {
        /// No hand-over yet.
        pub(crate) fn new() -> Sweeper<F> {
            Sweeper {
                incoming: Mutex::new(Vec::new()),
            }
        }
    }

    /// Hands a pending completion to the waiter, and unparks it (`waiter`: its thread, if it
    /// runs; without it the entry waits until it starts).
    pub(crate) fn hand_over(
        &self,
        shared: Arc<Signal<F>>,
        watch: Box<dyn Watch<F>>,
        waiter: Option<&Thread>,
    ) {
        self.incoming
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Entry { shared, watch });
        if let Some(thread) = waiter {
            thread.unpark();
        }
    }

    fn take_incoming(&self, into: &mut Vec<Entry<F>>) {
        let mut incoming = self.incoming.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut incoming);
    }

    /// The waiter's loop: sweep what is pending; pause (`park_timeout`, longer each time
    /// nothing resolved) while something is, `park` while nothing is. Returns when `stop` was
    /// true before a look that found nothing pending (the waiter never stops; tests do).
    pub(crate) fn run(
        &self,
        park: impl Fn(),
        park_timeout: impl Fn(Duration),
        stop: impl Fn() -> bool,
    ) {
        let mut pending: Vec<Entry<F>> = Vec::new();
        let mut pause = FIRST_PAUSE;
        loop {
            let last = stop();
            let before = pending.len();
            self.take_incoming(&mut pending);
            if pending.len() > before {
                pause = FIRST_PAUSE;
            }
            if pending.is_empty() {
                if last {
                    return;
                }
                // A hand-over after the look above unparks: the token makes this return.
                park();
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
            park_timeout(pause);
            pause = (pause * 2).min(LAST_PAUSE);
        }
    }
}
