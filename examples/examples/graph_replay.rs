//! A host function captured into a graph and the graph replayed: `cuLaunchHostFunc` between
//! `cuStreamBeginCapture` and `cuStreamEndCapture` records a host node, and every
//! `cuGraphLaunch` of the instantiated graph calls it again with the same user data (which must
//! therefore live as long as the graph and its executable).
//!
//! `cargo run -p cuda-hostcb-examples --example graph_replay`

use std::ffi::c_void;
use std::process::ExitCode;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use cuda_hostcb_examples::newest::driver as cu;
use cuda_hostcb_examples::{Outcome, expect, run};

/// Runs on a CUDA thread: only record (never panic, never call CUDA); the main thread checks.
unsafe extern "C" fn count_call(data: *mut c_void) {
    // SAFETY: `data` is the `AtomicU32` that `main` keeps alive until the graph is destroyed.
    let calls = unsafe { &*data.cast::<AtomicU32>() };
    calls.fetch_add(1, Ordering::SeqCst);
}

fn example() -> Outcome {
    const REPLAYS: u32 = 10;
    let calls = AtomicU32::new(0);
    let data = ptr::from_ref(&calls).cast_mut().cast::<c_void>();
    // SAFETY: every handle comes from the call before; `calls` outlives the graph and its
    // executable, destroyed after the stream is synchronised.
    unsafe {
        let (mut device, mut ctx, mut stream) = (0, ptr::null_mut(), ptr::null_mut());
        cu::cuDeviceGet(&mut device, 0)?;
        cu::cuDevicePrimaryCtxRetain(&mut ctx, device)?;
        cu::cuCtxSetCurrent(ctx)?;
        cu::cuStreamCreate(&mut stream, cu::CUstream_flags::CU_STREAM_NON_BLOCKING.0)?;

        let mode = cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        cu::cuStreamBeginCapture(stream, mode)?;
        cu::cuLaunchHostFunc(stream, Some(count_call), data)?; // recorded, not run
        let (mut graph, mut exec) = (ptr::null_mut(), ptr::null_mut());
        cu::cuStreamEndCapture(stream, &mut graph)?;
        cu::cuGraphInstantiate(&mut exec, graph, 0)?;
        for _ in 0..REPLAYS {
            cu::cuGraphLaunch(exec, stream)?;
        }
        cu::cuStreamSynchronize(stream)?;

        cu::cuGraphExecDestroy(exec)?;
        cu::cuGraphDestroy(graph)?;
        cu::cuStreamDestroy(stream)?;
        cu::cuDevicePrimaryCtxRelease(device)?;
    }
    let seen = calls.load(Ordering::SeqCst);
    expect("host function calls", REPLAYS, seen)?;
    Ok(format!(
        "graph replayed {REPLAYS} times, host function ran {seen} times"
    ))
}

fn main() -> ExitCode {
    run("graph_replay", example)
}
