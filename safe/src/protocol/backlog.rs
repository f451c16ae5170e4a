//! The reaper's hand-off ([`crate::reaper`]): a bounded backlog of jobs that one thread takes
//! whole and runs, parking while there is none, and that other threads wait on until it is
//! drained. Model-checked with loom (`cargo xtask loom`, `tests/loom`), which compiles this file.
//!
//! - [`Backlog::offer`] never blocks on the taker: it pushes under the lock and unparks the
//!   taker if it had parked (or was about to: `parked` is set under the same lock before it
//!   parks, and the park token makes a later `park` return). A full backlog refuses the job.
//! - [`Backlog::serve`] takes every waiting job at once and counts them as being run until it
//!   comes back for more, so that [`Backlog::wait`] and [`Backlog::pending`] see a job from its
//!   hand-over until it has run.

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::const_fn;
use crate::sync::thread::Thread;
use crate::sync::{Condvar, Mutex, MutexGuard};

struct Queue<J> {
    /// Waiting jobs (never more than the capacity: no reallocation once reserved).
    jobs: Vec<J>,
    /// Jobs the taker has taken and is running now.
    running: usize,
    /// The taker is parked (or about to park) and must be unparked by the next hand-over.
    parked: bool,
    /// Threads in [`Backlog::wait`].
    waiters: usize,
}

/// A bounded backlog of jobs for one taking thread.
pub(crate) struct Backlog<J> {
    queue: Mutex<Queue<J>>,
    /// Signalled when the backlog is empty and nothing is running, if anyone waits.
    idle: Condvar,
    capacity: usize,
    overflowed: AtomicU64,
}

impl<J> Backlog<J> {
    const_fn! {
        /// An empty backlog for at most `capacity` jobs.
        pub(crate) fn new(capacity: usize) -> Backlog<J> {
            Backlog {
                queue: Mutex::new(Queue {
                    jobs: Vec::new(),
                    running: 0,
                    parked: false,
                    waiters: 0,
                }),
                idle: Condvar::new(),
                capacity,
                overflowed: AtomicU64::new(0),
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue<J>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocates the backlog's whole capacity (before the taker starts).
    pub(crate) fn reserve(&self) {
        let mut queue = self.lock();
        let want = self.capacity.saturating_sub(queue.jobs.capacity());
        queue.jobs.reserve_exact(want);
    }

    /// Hands `job` to the taker `taker`, waking it if it parked; gives the job back when the
    /// backlog is full.
    #[inline]
    pub(crate) fn offer(&self, job: J, taker: &Thread) -> Result<(), J> {
        let mut queue = self.lock();
        if queue.jobs.len() >= self.capacity {
            return Err(job);
        }
        queue.jobs.push(job);
        let wake = std::mem::take(&mut queue.parked);
        drop(queue);
        if wake {
            taker.unpark();
        }
        Ok(())
    }

    /// Counts a job that was refused and run where it was handed over.
    pub(crate) fn count_overflow(&self) {
        self.overflowed.fetch_add(1, Ordering::Relaxed);
    }

    /// The taker's loop, on the taking thread (the one [`offer`](Self::offer) is given): take
    /// the whole backlog, `run` each job, `park` when there is none. Returns when `stop` was
    /// true before a look that found the backlog empty (the reaper never stops; tests do).
    pub(crate) fn serve(&self, mut run: impl FnMut(J), park: impl Fn(), stop: impl Fn() -> bool) {
        let mut mine: Vec<J> = Vec::with_capacity(self.capacity);
        loop {
            let last = stop();
            {
                let mut queue = self.lock();
                queue.running = 0;
                if queue.jobs.is_empty() {
                    if queue.waiters > 0 {
                        self.idle.notify_all();
                    }
                    if last {
                        return;
                    }
                    queue.parked = true;
                    drop(queue);
                    // A hand-over after `parked` was set unparks: the token makes this return.
                    park();
                    continue;
                }
                // Both vectors keep their capacity: no allocation after the first.
                std::mem::swap(&mut queue.jobs, &mut mine);
                queue.running = mine.len();
            }
            for job in mine.drain(..) {
                run(job);
            }
        }
    }

    /// Jobs handed over and not yet run.
    pub(crate) fn pending(&self) -> usize {
        let queue = self.lock();
        queue.jobs.len() + queue.running
    }

    /// Waits until every job handed over so far has run.
    pub(crate) fn wait(&self) {
        let mut queue = self.lock();
        queue.waiters += 1;
        while !(queue.jobs.is_empty() && queue.running == 0) {
            queue = self.idle.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
        queue.waiters -= 1;
    }

    /// Jobs refused because the backlog was full.
    pub(crate) fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Relaxed)
    }
}
