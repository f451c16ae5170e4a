//! The safe layer's rows (crate `cuda-hostcb-safe`, driver API): B1, B2 and B3 through Rust
//! closures, with the same warm-ups, counts and clock as the raw rows.
//!
//! - B1: `Stream::launch` of a one-shot closure, N times, then `Stream::synchronize`;
//! - B2: a closure captured with `Stream::launch_fn` (owned by the graph), replayed M times;
//! - B3: 64 closures chained with `Graph::add_host_node`, replayed M/64 + 1 times.
//!
//! Each closure captures a reference to the counter, so, like a user's closure with state, it
//! is boxed; it then counts exactly as the raw rows' C function does.

use crate::figures::{B1_WARMUP, B2_WARMUP, B3_WARMUP, bump, counter, per_unit_us, repeat, timed};
use crate::report::{Outcome, Row};
use crate::{BenchError, CHAIN, Figure, Sizes, check_count};
use cuda_hostcb_safe::{CaptureMode, Context, Graph, Stream};

/// The target whose bindings the safe layer is compiled over (the newest), which names its row.
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        const TARGET: &str = stringify!($target);
    };
}
cuda_hostcb::newest_target!(newest);

/// Measures B1, B2 and B3 through the safe layer on device `ordinal`.
fn row(ordinal: i32, sizes: &Sizes) -> Row {
    let figures = match measure(ordinal, sizes) {
        Ok(figures) => figures,
        Err(e) => Figure::ALL.iter().map(|f| (*f, Err(e.clone()))).collect(),
    };
    Row {
        target: TARGET.to_owned(),
        api: "safe".to_owned(),
        figures,
    }
}

fn measure(ordinal: i32, sizes: &Sizes) -> Result<Vec<(Figure, Outcome)>, BenchError> {
    let ordinal = usize::try_from(ordinal).unwrap_or(usize::MAX);
    let ctx = Context::primary(ordinal)?;
    ctx.make_current()?;
    let stream = Stream::new(&ctx)?;
    let calls = counter();
    let sync = || stream.synchronize();

    let b1 = repeat(sizes.reps, || {
        let n = sizes.expected_calls(Figure::B1);
        let launch = || stream.launch(move || bump(calls));
        let (elapsed, got) = timed(B1_WARMUP, n, launch, sync)?;
        check_count(Figure::B1, n, got)?;
        Ok(per_unit_us(elapsed, n))
    });

    let b2 = (|| -> Outcome {
        stream.begin_capture(CaptureMode::Global)?;
        let launched = stream.launch_fn(move || bump(calls));
        let graph = stream.end_capture();
        launched?;
        let exec = graph?.instantiate()?;
        repeat(sizes.reps, || {
            let m = sizes.b2_launches();
            let (elapsed, got) = timed(B2_WARMUP, m, || exec.launch(&stream), sync)?;
            check_count(Figure::B2, sizes.expected_calls(Figure::B2), got)?;
            Ok(per_unit_us(elapsed, m))
        })
    })();

    let b3 = (|| -> Outcome {
        let graph = Graph::new(&ctx)?;
        let mut prev = graph.add_host_node(&[], move || bump(calls))?;
        for _ in 1..CHAIN {
            prev = graph.add_host_node(&[prev], move || bump(calls))?;
        }
        let exec = graph.instantiate()?;
        repeat(sizes.reps, || {
            let launches = sizes.b3_launches();
            let (elapsed, got) = timed(B3_WARMUP, launches, || exec.launch(&stream), sync)?;
            let nodes = sizes.expected_calls(Figure::B3);
            check_count(Figure::B3, nodes, got)?;
            Ok(per_unit_us(elapsed, nodes))
        })
    })();

    Ok(vec![(Figure::B1, b1), (Figure::B2, b2), (Figure::B3, b3)])
}

/// Measures the safe layer on device `ordinal`, if `select` accepts it (called with the
/// target its bindings are of and `"safe"`).
pub fn rows(ordinal: i32, sizes: &Sizes, select: &dyn Fn(&str, &str) -> bool) -> Vec<Row> {
    if !select(TARGET, "safe") {
        return Vec::new();
    }
    eprintln!("measuring {TARGET} safe ...");
    vec![row(ordinal, sizes)]
}
