//! Scenario 4: user objects. The destroy callback of a `cuUserObjectCreate` /
//! `cudaUserObjectCreate` object moved into a graph runs exactly once, and only after the graph
//! and every executable graph holding it are destroyed and their launches have finished.
//!
//! The destructor runs asynchronously on a driver thread (CUDA requires
//! `..._NO_DESTRUCTOR_SYNC`, so nothing can wait on it): the test polls with a bounded timeout.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use super::{user_data, wait_for};
use crate::binding::Binding;
use crate::check::{Checker, During, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, Graph, Stream};

/// Launches: each executable graph is launched this many times, alternating.
pub const LAUNCHES_PER_EXEC: u32 = 2;
/// How long each launch's host function takes, so launches are still pending when the
/// executables are destroyed.
pub const HOST_FN_TIME: Duration = Duration::from_millis(20);
/// How long the test waits for the destructor.
pub const DESTRUCTOR_TIMEOUT: Duration = Duration::from_secs(10);
/// How long it keeps watching after the destructor ran, for a second call.
pub const SECOND_CALL_WATCH: Duration = Duration::from_millis(100);

/// What the host function and the destructor record.
#[derive(Debug)]
pub struct State {
    /// Host-function calls that have finished.
    finished: AtomicU32,
    /// Destructor calls.
    destroyed: AtomicU32,
    /// `finished` as the first destructor call saw it; -1 before.
    finished_at_destroy: AtomicI64,
    /// The pointer the destructor got.
    destroy_ptr: AtomicUsize,
}

impl Default for State {
    fn default() -> Self {
        Self {
            finished: AtomicU32::new(0),
            destroyed: AtomicU32::new(0),
            finished_at_destroy: AtomicI64::new(-1),
            destroy_ptr: AtomicUsize::new(0),
        }
    }
}

/// The graph's host function: takes [`HOST_FN_TIME`], then counts itself finished.
///
/// # Safety
/// `data` must point at a live [`State`].
unsafe extern "C" fn slow_host_fn(data: *mut c_void) {
    // SAFETY: the caller passes a live `State`.
    let state = unsafe { &*data.cast::<State>() };
    std::thread::sleep(HOST_FN_TIME);
    state.finished.fetch_add(1, Ordering::SeqCst);
}

/// The user object's destructor: records its call, its pointer and how many launches had
/// finished.
///
/// # Safety
/// `ptr` must point at a live [`State`].
unsafe extern "C" fn on_destroy(ptr: *mut c_void) {
    // SAFETY: the caller passes a live `State`.
    let state = unsafe { &*ptr.cast::<State>() };
    let finished = state.finished.load(Ordering::SeqCst);
    let _ = state.finished_at_destroy.compare_exchange(
        -1,
        i64::from(finished),
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    state.destroy_ptr.store(ptr.addr(), Ordering::SeqCst);
    state.destroyed.fetch_add(1, Ordering::SeqCst);
}

/// What the run saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Launches in all.
    pub launches: u32,
    /// Destructor calls right after the graph was destroyed (both executables alive).
    pub after_graph_destroyed: u32,
    /// Destructor calls right after the first executable was destroyed (the second alive).
    pub after_first_exec_destroyed: u32,
    /// Whether the destructor ran within [`DESTRUCTOR_TIMEOUT`] of the synchronisation after
    /// the last destroy.
    pub destructor_ran: bool,
    /// Destructor calls once it ran and [`SECOND_CALL_WATCH`] passed.
    pub final_calls: u32,
    /// Finished host-function calls when the destructor ran (`None` if it never did).
    pub finished_at_destroy: Option<u32>,
    /// Whether the destructor got the object's own pointer.
    pub destroy_ptr_is_own: bool,
}

/// The contract for a run with `launches` launches.
pub fn expected(launches: u32) -> Observation {
    Observation {
        launches,
        after_graph_destroyed: 0,
        after_first_exec_destroyed: 0,
        destructor_ran: true,
        final_calls: 1,
        finished_at_destroy: Some(launches),
        destroy_ptr_is_own: true,
    }
}

/// Creates the object, moves it into a graph with a slow host node, instantiates two
/// executables, launches them, destroys graph and executables while launches are pending,
/// synchronises, then waits (bounded) for the destructor.
pub fn observe<B: Binding>() -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    // Boxed so that it can be leaked if the destructor never comes (it may still come later).
    let state = Box::new(State::default());
    let seen = observe_with::<B>(&state);
    if state.destroyed.load(Ordering::SeqCst) == 0 {
        // The destructor may still come (late, or after a failed step dropped the graph): it
        // must find its state, so the state is leaked rather than freed.
        std::mem::forget(state);
    }
    seen
}

fn observe_with<B: Binding>(state: &State) -> Result<Observation, Failure> {
    let stream = Stream::<B>::new()?;
    let graph = Graph::<B>::new()?;
    // SAFETY: `state` outlives the stream, whose drop waits for every launch.
    unsafe { graph.add_host_node(slow_host_fn, user_data(state)) }?;
    // SAFETY: `state` outlives the destructor call (the caller leaks it if it never came).
    let object = unsafe { B::user_object_create(user_data(state), on_destroy) }
        .during("create the user object")?;
    // SAFETY: the one reference from `user_object_create` is ours to give.
    unsafe { graph.move_user_object(object) }?;
    let execs = [graph.instantiate()?, graph.instantiate()?];
    let mut launches = 0;
    for _ in 0..LAUNCHES_PER_EXEC {
        for exec in &execs {
            exec.launch(&stream)?;
            launches += 1;
        }
    }
    let destroyed = || state.destroyed.load(Ordering::SeqCst);
    graph.destroy()?;
    let after_graph_destroyed = destroyed();
    let [first, second] = execs;
    first.destroy()?;
    let after_first_exec_destroyed = destroyed();
    second.destroy()?;
    // As CUDA's guide does: once the pending launches are synchronised, the last reference
    // goes and the destructor runs, asynchronously.
    stream.sync()?;
    let destructor_ran = wait_for(DESTRUCTOR_TIMEOUT, || destroyed() > 0).is_some();
    if destructor_ran {
        std::thread::sleep(SECOND_CALL_WATCH);
    }
    let finished_at_destroy = state.finished_at_destroy.load(Ordering::SeqCst);
    Ok(Observation {
        launches,
        after_graph_destroyed,
        after_first_exec_destroyed,
        destructor_ran,
        final_calls: destroyed(),
        finished_at_destroy: u32::try_from(finished_at_destroy).ok(),
        destroy_ptr_is_own: state.destroy_ptr.load(Ordering::SeqCst) == user_data(state).addr(),
    })
}

/// Scenario 4's check.
pub fn check(expected: &Observation, seen: &Observation) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq("launches", expected.launches, seen.launches);
    c.eq(
        "destructor calls after the graph was destroyed (both executables alive)",
        expected.after_graph_destroyed,
        seen.after_graph_destroyed,
    );
    c.eq(
        "destructor calls after the first executable was destroyed (the second alive)",
        expected.after_first_exec_destroyed,
        seen.after_first_exec_destroyed,
    );
    c.eq(
        format!("destructor ran within {DESTRUCTOR_TIMEOUT:?} of the sync after the last destroy"),
        expected.destructor_ran,
        seen.destructor_ran,
    );
    c.eq(
        format!("destructor calls, {SECOND_CALL_WATCH:?} after the first"),
        expected.final_calls,
        seen.final_calls,
    );
    c.eq(
        "finished launches when the destructor ran",
        expected.finished_at_destroy,
        seen.finished_at_destroy,
    );
    c.eq(
        "destructor got the object's pointer",
        expected.destroy_ptr_is_own,
        seen.destroy_ptr_is_own,
    );
    c.finish()
}

/// The trial.
pub fn run<B: Binding>() -> Result<Ran, Failure> {
    let seen = observe::<B>()?;
    let mut want = expected(2 * LAUNCHES_PER_EXEC);
    if wrong_expectations() {
        // As if destroying the graph released the executables' references too.
        want.after_graph_destroyed = 1;
    }
    check(&want, &seen)?;
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_passes_itself() {
        assert_eq!(check(&expected(4), &expected(4)), Ok(()));
    }

    #[test]
    fn an_early_or_repeated_destructor_is_reported() {
        let mut seen = expected(4);
        seen.after_first_exec_destroyed = 1;
        seen.finished_at_destroy = Some(3);
        seen.final_calls = 2;
        let text = check(&expected(4), &seen).unwrap_err().to_string();
        assert_eq!(
            text,
            "destructor calls after the first executable was destroyed (the second alive): \
             expected 0, seen 1; destructor calls, 100ms after the first: expected 1, seen 2; \
             finished launches when the destructor ran: expected Some(4), seen Some(3)"
        );
    }

    #[test]
    fn the_callbacks_record_order_and_pointer() {
        let state = State::default();
        // SAFETY: `state` is live.
        unsafe {
            slow_host_fn(user_data(&state));
            on_destroy(user_data(&state));
            on_destroy(user_data(&state));
        }
        assert_eq!(state.finished_at_destroy.load(Ordering::SeqCst), 1);
        assert_eq!(state.destroyed.load(Ordering::SeqCst), 2);
        assert_eq!(
            state.destroy_ptr.load(Ordering::SeqCst),
            user_data(&state).addr()
        );
    }
}
