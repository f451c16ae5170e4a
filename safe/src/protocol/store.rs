//! The bookkeeping of an updatable executable's closures (`UpdatableExec`, `exec_update.rs`):
//! which closure each node runs now, and which replaced ones a launch may still call.
//! Model-checked with loom (`cargo xtask loom`, `tests/loom`), which compiles this file.
//!
//! Updates ([`Store::install`]) come from the executable's owner, one at a time; calls
//! ([`Store::called`]) from CUDA's threads, concurrently with them. A closure installed at
//! generation `g` reports its calls as `called(g)`: its launch was made after every
//! replacement up to `g`, and CUDA runs an executable's launches one after another, so the
//! closures replaced up to `g` can no longer be called and are given up; those replaced later
//! stay. The generation of the oldest replacement is also kept outside the lock, so that a call
//! with nothing to give up takes no lock.

use std::collections::{HashMap, VecDeque};

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU64, Ordering};

/// One closure held by the store: the generation it was installed at, and its owner.
pub(crate) struct Held<O> {
    generation: u64,
    _owner: O,
}

impl<O> Held<O> {
    /// `owner`, installed at `generation`.
    pub(crate) fn new(generation: u64, owner: O) -> Held<O> {
        Held {
            generation,
            _owner: owner,
        }
    }
}

/// The closures of one executable that a launch may still call.
pub(crate) struct Store<O> {
    state: Mutex<State<O>>,
    /// The generation at which the oldest retired closure was replaced (`u64::MAX`: none), so
    /// that a call can skip the lock when there is nothing to free.
    oldest_retired: AtomicU64,
}

struct State<O> {
    /// The closure each node set through the store runs now (node address as the key).
    current: HashMap<usize, Held<O>>,
    /// Replaced closures that a launch may still call, with the generation that replaced each
    /// (increasing).
    retired: VecDeque<(u64, Held<O>)>,
    /// The most closures held at once.
    most: usize,
}

impl<O> State<O> {
    fn held(&self) -> usize {
        self.current.len() + self.retired.len()
    }
}

impl<O> std::fmt::Debug for Store<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Store")
            .field("current", &state.current.len())
            .field("retired", &state.retired.len())
            .finish()
    }
}

impl<O> Store<O> {
    /// An empty store.
    pub(crate) fn new() -> Store<O> {
        Store {
            state: Mutex::new(State {
                current: HashMap::new(),
                retired: VecDeque::new(),
                most: 0,
            }),
            oldest_retired: AtomicU64::new(u64::MAX),
        }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, State<O>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `held` the current closure of `node`. The one it replaces is retired, or returned
    /// (to drop at once, off CUDA's threads) when no launch was made while it was current:
    /// `launched_at` is the generation at the last launch.
    pub(crate) fn install(&self, node: usize, held: Held<O>, launched_at: u64) -> Option<Held<O>> {
        let replaced_by = held.generation;
        let mut state = self.lock();
        let old = state.current.insert(node, held);
        let unseen = match old {
            Some(old) if old.generation > launched_at => Some(old),
            Some(old) => {
                if state.retired.is_empty() {
                    self.oldest_retired.store(replaced_by, Ordering::Release);
                }
                state.retired.push_back((replaced_by, old));
                None
            }
            None => None,
        };
        state.most = state.most.max(state.held());
        unseen
    }

    /// A closure installed at `generation` is being called: gives the closures replaced up to
    /// `generation` to `dispose` (outside the lock), if there are any.
    #[inline]
    pub(crate) fn called(&self, generation: u64, dispose: impl FnOnce(Vec<(u64, Held<O>)>)) {
        if self.oldest_retired.load(Ordering::Acquire) > generation {
            return;
        }
        let due: Vec<(u64, Held<O>)> = {
            let mut state = self.lock();
            let keep = state
                .retired
                .iter()
                .position(|(replaced, _)| *replaced > generation)
                .unwrap_or(state.retired.len());
            let due = state.retired.drain(..keep).collect();
            let oldest = state.retired.front().map_or(u64::MAX, |(r, _)| *r);
            self.oldest_retired.store(oldest, Ordering::Release);
            due
        };
        if !due.is_empty() {
            dispose(due);
        }
    }

    /// The closures held now: each node's current one and the retired ones.
    pub(crate) fn held(&self) -> usize {
        self.lock().held()
    }

    /// The most closures held at once.
    pub(crate) fn most(&self) -> usize {
        self.lock().most
    }
}
