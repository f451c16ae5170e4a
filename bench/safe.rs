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

/// Implements one target's safe-layer row.
macro_rules! safe_row {
    ($target:ident) => {
        mod $target {
            use super::*;
            use cuda_hostcb_safe::CaptureMode;
            use cuda_hostcb_safe::$target::{Context, Graph, Stream};

            /// Measures B1, B2 and B3 through this target's safe layer on device `ordinal`.
            pub fn row(ordinal: i32, sizes: &Sizes) -> Row {
                let figures = match measure(ordinal, sizes) {
                    Ok(figures) => figures,
                    Err(e) => Figure::ALL.iter().map(|f| (*f, Err(e.clone()))).collect(),
                };
                Row {
                    target: stringify!($target).to_owned(),
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
                        let (elapsed, got) =
                            timed(B3_WARMUP, launches, || exec.launch(&stream), sync)?;
                        let nodes = sizes.expected_calls(Figure::B3);
                        check_count(Figure::B3, nodes, got)?;
                        Ok(per_unit_us(elapsed, nodes))
                    })
                })();

                Ok(vec![(Figure::B1, b1), (Figure::B2, b2), (Figure::B3, b3)])
            }
        }
    };
}

macro_rules! safe_target_row {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        safe_row!($target);
    };
}
cuda_hostcb::for_each_target!(safe_target_row);

/// The body that measures one row on a device.
pub type RowFn = fn(i32, &Sizes) -> Row;

/// Measures the safe layer of every target that `select` accepts (called with `<target>` and
/// `"safe"`) on device `ordinal`.
pub fn rows(ordinal: i32, sizes: &Sizes, select: &dyn Fn(&str, &str) -> bool) -> Vec<Row> {
    let mut all: Vec<(&str, RowFn)> = Vec::new();
    macro_rules! target_row {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            all.push((stringify!($target), $target::row))
        };
    }
    cuda_hostcb::for_each_target!(target_row);
    all.iter()
        .filter(|(target, _)| select(target, "safe"))
        .map(|(target, row)| {
            eprintln!("measuring {target} safe ...");
            row(ordinal, sizes)
        })
        .collect()
}
