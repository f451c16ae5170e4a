//! Host nodes built by hand: `cuGraphAddHostNode` twice, the second depending on the first, so
//! every launch of the graph calls `a` and then `b`, each with its own user data.
//!
//! `cargo run -p cuda-hostcb-examples --example host_node`

use std::ffi::c_void;
use std::process::ExitCode;
use std::ptr;
use std::sync::Mutex;

use cuda_hostcb_examples::newest::driver as cu;
use cuda_hostcb_examples::{Outcome, expect, run};

/// The user data of one host node: its name, and the log both nodes write to.
struct Step<'a> {
    name: &'static str,
    log: &'a Mutex<Vec<&'static str>>,
}

/// Runs on a CUDA thread: only record (never panic, never call CUDA); the main thread checks.
unsafe extern "C" fn record(data: *mut c_void) {
    // SAFETY: `data` is a `Step` that `main` keeps alive until the graph is destroyed.
    let step = unsafe { &*data.cast::<Step<'_>>() };
    if let Ok(mut log) = step.log.lock() {
        log.push(step.name);
    }
}

fn example() -> Outcome {
    const LAUNCHES: usize = 3;
    let log = Mutex::new(Vec::new());
    let steps = [
        Step {
            name: "a",
            log: &log,
        },
        Step {
            name: "b",
            log: &log,
        },
    ];
    // SAFETY: every handle comes from the call before; `steps` outlive the graph and its
    // executable, destroyed after the stream is synchronised.
    unsafe {
        let (mut device, mut ctx, mut stream) = (0, ptr::null_mut(), ptr::null_mut());
        cu::cuDeviceGet(&mut device, 0)?;
        cu::cuDevicePrimaryCtxRetain(&mut ctx, device)?;
        cu::cuCtxSetCurrent(ctx)?;
        cu::cuStreamCreate(&mut stream, cu::CUstream_flags::CU_STREAM_NON_BLOCKING.0)?;

        let mut graph = ptr::null_mut();
        cu::cuGraphCreate(&mut graph, 0)?;
        let mut nodes: Vec<cu::CUgraphNode> = Vec::new();
        for step in &steps {
            let params = cu::CUDA_HOST_NODE_PARAMS {
                fn_: Some(record),
                userData: ptr::from_ref(step).cast_mut().cast(),
            };
            // Each node depends on the one added before it, the first on none.
            let (after, count) = match nodes.last() {
                Some(last) => (ptr::from_ref(last), 1),
                None => (ptr::null(), 0),
            };
            let mut node = ptr::null_mut();
            cu::cuGraphAddHostNode(&mut node, graph, after, count, &params)?;
            nodes.push(node);
        }
        let mut exec = ptr::null_mut();
        cu::cuGraphInstantiate(&mut exec, graph, 0)?;
        for _ in 0..LAUNCHES {
            cu::cuGraphLaunch(exec, stream)?;
        }
        cu::cuStreamSynchronize(stream)?;

        cu::cuGraphExecDestroy(exec)?;
        cu::cuGraphDestroy(graph)?;
        cu::cuStreamDestroy(stream)?;
        cu::cuDevicePrimaryCtxRelease(device)?;
    }
    let seen = log
        .into_inner()
        .map_err(|_| "the log's lock was poisoned")?;
    expect("host node calls", ["a", "b"].repeat(LAUNCHES), seen.clone())?;
    Ok(format!(
        "2 host nodes (b after a), graph launched {LAUNCHES} times: {}",
        seen.join(" ")
    ))
}

fn main() -> ExitCode {
    run("host_node", example)
}
