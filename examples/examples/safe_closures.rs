//! Rust closures through the safe layer (`cuda-hostcb-safe`): a one-shot closure on a stream
//! (`Stream::launch`), and a closure in a host node (`Graph::add_host_node`) that every
//! `GraphExec::launch` calls, kept alive by the executable after the graph is dropped.
//!
//! `cargo run -p cuda-hostcb-examples --example safe_closures`

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cuda_hostcb_examples::{Outcome, expect, run};
use cuda_hostcb_safe::{Context, Graph, Stream};

fn example() -> Outcome {
    const LAUNCHES: u32 = 5;
    let ctx = Context::primary(0)?;
    ctx.make_current()?;
    let stream = Stream::new(&ctx)?;

    // Closures run on a CUDA thread: they only record; the main thread checks.
    let once = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&once);
    stream.launch(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })?;

    let replays = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&replays);
    let graph = Graph::new(&ctx)?;
    graph.add_host_node(&[], move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })?;
    let exec = graph.instantiate()?;
    drop(graph); // the executable keeps the closure alive
    for _ in 0..LAUNCHES {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;

    let (once, replays) = (once.load(Ordering::SeqCst), replays.load(Ordering::SeqCst));
    expect("Stream::launch closure calls", 1, once)?;
    expect("host node closure calls", LAUNCHES, replays)?;
    Ok(format!(
        "Stream::launch closure ran {once} time, GraphExec launched {LAUNCHES} times, host node closure ran {replays} times"
    ))
}

fn main() -> ExitCode {
    run("safe_closures", example)
}
