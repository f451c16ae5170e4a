//! The bodies of B1, B2 and B3, written once over [`Binding`] (the regression tests' trait, one
//! implementation per target and API) and mirroring `hostcb_c.c` step for step: the same
//! warm-ups, the same counts, a monotonic clock around the enqueue loop and the final
//! synchronise, and a callback that increments a global counter.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use hostcb_tests::binding::{Binding, HostFn, RawExec, RawGraph, RawNode, RawStream};

use crate::report::{Outcome, Row, Summary};
use crate::{BenchError, CHAIN, Figure, Sizes, check_count};

/// Host functions enqueued (and synchronised) before B1's clock starts, as in the C reference.
pub const B1_WARMUP: u64 = 1000;
/// Graph launches before B2's clock starts.
pub const B2_WARMUP: u64 = 100;
/// Graph launches before B3's clock starts.
pub const B3_WARMUP: u64 = 1;

/// Host functions that ran since the last reset.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// The counter every figure's host function increments.
pub fn counter() -> &'static AtomicU64 {
    &CALLS
}

/// Counts one call on `counter`: what every figure's host function does, and nothing else.
///
/// The host functions of one stream run one after another, which the C reference's
/// `counter++` relies on too; a plain load and store (no read-modify-write) keeps the callback
/// as cheap as C's. Were they ever to overlap, the count would come out short and the figure
/// would be rejected, not reported.
#[inline(always)]
pub fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

/// The host function of the raw figures, as C's: counts itself through a global.
extern "C" fn count_call(_: *mut c_void) {
    bump(&CALLS);
}

/// The counting host function, as both APIs take it.
pub const COUNT: HostFn = count_call;

fn reset_calls() {
    CALLS.store(0, Relaxed);
}

/// Host functions counted since the last reset.
pub fn calls() -> u64 {
    CALLS.load(Relaxed)
}

/// Microseconds per unit.
pub fn per_unit_us(elapsed: Duration, units: u64) -> f64 {
    elapsed.as_secs_f64() / units as f64 * 1e6
}

/// Runs `once` one untimed time, then `reps` times, and summarises what the timed runs returned.
pub fn repeat(
    reps: usize,
    mut once: impl FnMut() -> Result<f64, BenchError>,
) -> Result<Summary, BenchError> {
    once()?;
    let samples = (0..reps).map(|_| once()).collect::<Result<Vec<_>, _>>()?;
    Summary::new(samples).ok_or(BenchError::Usage(
        "--reps 0 leaves nothing to measure; pass --reps 1 or more".into(),
    ))
}

/// A stream, synchronised and destroyed on drop.
struct Stream<A: Binding>(RawStream, PhantomData<A>);

impl<A: Binding> Stream<A> {
    fn new() -> Result<Self, BenchError> {
        // The device was entered on this thread (`measure`).
        Ok(Stream(A::stream_create()?, PhantomData))
    }
}

impl<A: Binding> Drop for Stream<A> {
    fn drop(&mut self) {
        // SAFETY: the stream is live; pending host functions finish before it goes.
        unsafe {
            let _ = A::stream_synchronize(self.0);
            let _ = A::stream_destroy(self.0);
        }
    }
}

/// A graph, destroyed on drop.
struct Graph<A: Binding>(RawGraph, PhantomData<A>);

impl<A: Binding> Drop for Graph<A> {
    fn drop(&mut self) {
        // SAFETY: the graph is live and owned here.
        let _ = unsafe { A::graph_destroy(self.0) };
    }
}

/// An executable graph, destroyed on drop (CUDA frees one still in flight when it completes).
struct Exec<A: Binding>(RawExec, PhantomData<A>);

impl<A: Binding> Drop for Exec<A> {
    fn drop(&mut self) {
        // SAFETY: the executable graph is live and owned here.
        let _ = unsafe { A::exec_destroy(self.0) };
    }
}

/// Makes `warmup` launches and synchronises, resets the count, then times `units` launches and
/// the synchronisation after them; returns the time and the callbacks counted.
pub fn timed<E: Into<BenchError>>(
    warmup: u64,
    units: u64,
    mut launch: impl FnMut() -> Result<(), E>,
    mut sync: impl FnMut() -> Result<(), E>,
) -> Result<(Duration, u64), BenchError> {
    for _ in 0..warmup {
        launch().map_err(Into::into)?;
    }
    sync().map_err(Into::into)?;
    reset_calls();
    let t0 = Instant::now();
    for _ in 0..units {
        launch().map_err(Into::into)?;
    }
    sync().map_err(Into::into)?;
    Ok((t0.elapsed(), calls()))
}

/// B1 once: `n` host functions on `s`, microseconds per callback.
pub fn b1_once<A: Binding>(s: RawStream, sizes: &Sizes) -> Result<f64, BenchError> {
    let n = sizes.expected_calls(Figure::B1);
    // SAFETY: `COUNT` is a plain function and the user data is null: valid for ever.
    let launch = || unsafe { A::launch_host_func(s, COUNT, ptr::null_mut()) };
    // SAFETY: `s` is live for the whole figure.
    let sync = || unsafe { A::stream_synchronize(s) };
    let (elapsed, got) = timed(B1_WARMUP, n, launch, sync)?;
    check_count(Figure::B1, n, got)?;
    Ok(per_unit_us(elapsed, n))
}

/// B2 once: `exec` (one host node) launched M times on `s`, microseconds per launch.
fn b2_once<A: Binding>(s: RawStream, exec: RawExec, sizes: &Sizes) -> Result<f64, BenchError> {
    let m = sizes.b2_launches();
    // SAFETY: `exec` and `s` are live for the whole figure.
    let launch = || unsafe { A::graph_launch(exec, s) };
    // SAFETY: as above.
    let sync = || unsafe { A::stream_synchronize(s) };
    let (elapsed, got) = timed(B2_WARMUP, m, launch, sync)?;
    check_count(Figure::B2, sizes.expected_calls(Figure::B2), got)?;
    Ok(per_unit_us(elapsed, m))
}

/// B3 once: `exec` (64 chained host nodes) launched M/64 + 1 times, microseconds per node.
fn b3_once<A: Binding>(s: RawStream, exec: RawExec, sizes: &Sizes) -> Result<f64, BenchError> {
    let launches = sizes.b3_launches();
    // SAFETY: as in `b2_once`.
    let launch = || unsafe { A::graph_launch(exec, s) };
    // SAFETY: as above.
    let sync = || unsafe { A::stream_synchronize(s) };
    let (elapsed, got) = timed(B3_WARMUP, launches, launch, sync)?;
    let nodes = sizes.expected_calls(Figure::B3);
    check_count(Figure::B3, nodes, got)?;
    Ok(per_unit_us(elapsed, nodes))
}

/// Captures one host function on `s` into a graph and instantiates it.
///
/// The capture is thread-local (the C reference's is global): the benchmark makes its CUDA
/// calls from one thread, so the mode changes nothing here, and the capture is not timed.
fn captured_one_node<A: Binding>(s: RawStream) -> Result<(Graph<A>, Exec<A>), BenchError> {
    // SAFETY: `s` is live and not capturing; the capture is always ended, even when the launch
    // inside it failed, so the stream is usable afterwards.
    let graph = unsafe {
        A::begin_capture(s)?;
        let launched = A::launch_host_func(s, COUNT, ptr::null_mut());
        let graph = A::end_capture(s);
        launched?;
        Graph::<A>(graph?, PhantomData)
    };
    // SAFETY: the graph is live.
    let exec = Exec::<A>(unsafe { A::instantiate(graph.0)? }, PhantomData);
    Ok((graph, exec))
}

/// Builds a graph of [`CHAIN`] host nodes, each after the previous one, and instantiates it.
fn chain<A: Binding>() -> Result<(Graph<A>, Exec<A>), BenchError> {
    let graph = Graph::<A>(A::graph_create()?, PhantomData);
    // SAFETY: every node is added to the live graph after a node of it; `COUNT` with null user
    // data is valid for ever.
    unsafe {
        let mut prev: Option<RawNode> = None;
        for _ in 0..CHAIN {
            let node = A::add_host_node_after(graph.0, prev.as_slice(), COUNT, ptr::null_mut())?;
            prev = Some(node);
        }
        let exec = Exec::<A>(A::instantiate(graph.0)?, PhantomData);
        Ok((graph, exec))
    }
}

fn b2<A: Binding>(s: RawStream, sizes: &Sizes) -> Outcome {
    let (_graph, exec) = captured_one_node::<A>(s)?;
    repeat(sizes.reps, || b2_once::<A>(s, exec.0, sizes))
}

fn b3<A: Binding>(s: RawStream, sizes: &Sizes) -> Outcome {
    let (_graph, exec) = chain::<A>()?;
    repeat(sizes.reps, || b3_once::<A>(s, exec.0, sizes))
}

/// Measures B1, B2 and B3 through `A` on device `ordinal`, each the median of `sizes.reps`
/// repetitions after a warm-up one. A figure that fails leaves the others to run.
pub fn run_row<A: Binding>(ordinal: i32, sizes: &Sizes) -> Row {
    let figures = match measure::<A>(ordinal, sizes) {
        Ok(figures) => figures,
        Err(e) => Figure::ALL.iter().map(|f| (*f, Err(e.clone()))).collect(),
    };
    Row {
        target: A::TARGET.to_owned(),
        api: A::API.module().to_owned(),
        figures,
    }
}

/// Enters the device (driver: `cuInit`, its primary context retained and made current;
/// runtime: `cudaSetDevice`), measures, and leaves it again (driver: the context released).
fn measure<A: Binding>(ordinal: i32, sizes: &Sizes) -> Result<Vec<(Figure, Outcome)>, BenchError> {
    // The probe accepted `ordinal`, so it is not negative; were it, CUDA would reject it.
    let device = usize::try_from(ordinal).unwrap_or(usize::MAX);
    let ctx = A::enter(device)?;
    let figures = {
        let stream = Stream::<A>::new()?;
        let s = stream.0;
        vec![
            (Figure::B1, repeat(sizes.reps, || b1_once::<A>(s, sizes))),
            (Figure::B2, b2::<A>(s, sizes)),
            (Figure::B3, b3::<A>(s, sizes)),
        ]
    };
    // SAFETY: `ctx` comes from `enter(device)`, and everything made in it is gone.
    if let Err(e) = unsafe { A::leave(ctx, device) } {
        eprintln!(
            "warning: {} {}: releasing the device failed: {e}",
            A::TARGET,
            A::API.module()
        );
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_counts() {
        reset_calls();
        // SAFETY: the callback ignores its argument.
        unsafe { COUNT(ptr::null_mut()) };
        count_call(ptr::null_mut());
        assert_eq!(calls(), 2);
    }

    #[test]
    fn repeat_runs_one_warmup_then_reps() {
        let mut runs = 0;
        let s = repeat(5, || {
            runs += 1;
            Ok(runs as f64)
        })
        .unwrap();
        assert_eq!(runs, 6);
        assert_eq!(
            s.samples,
            vec![2.0, 3.0, 4.0, 5.0, 6.0],
            "the warm-up is not a sample"
        );
        let err = repeat(3, || check_count(Figure::B1, 1, 0).map(|_| 1.0)).unwrap_err();
        assert!(matches!(err, BenchError::WrongCount { .. }));
    }

    #[test]
    fn per_unit() {
        assert_eq!(per_unit_us(Duration::from_millis(300), 100_000), 3.0);
    }
}
