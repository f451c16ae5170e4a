//! A host function on a stream through the raw driver bindings: `cuLaunchHostFunc` three times,
//! then `cuStreamSynchronize`; the host function counts its calls in the user data it is given.
//!
//! `cargo run -p cuda-hostcb-examples --example stream_callback`

use std::ffi::c_void;
use std::process::ExitCode;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use cuda_hostcb_examples::newest::driver as cu;
use cuda_hostcb_examples::{Outcome, expect, run};

/// Runs on a CUDA thread: only record (never panic, never call CUDA); the main thread checks.
unsafe extern "C" fn count_call(data: *mut c_void) {
    // SAFETY: `data` is the `AtomicU32` that `main` keeps alive until the stream is synchronised.
    let calls = unsafe { &*data.cast::<AtomicU32>() };
    calls.fetch_add(1, Ordering::SeqCst);
}

fn example() -> Outcome {
    const LAUNCHES: u32 = 3;
    let calls = AtomicU32::new(0);
    let data = ptr::from_ref(&calls).cast_mut().cast::<c_void>();
    // SAFETY: every handle comes from the call before; `calls` outlives every launch, since the
    // stream is synchronised before it goes.
    unsafe {
        let (mut device, mut ctx, mut stream) = (0, ptr::null_mut(), ptr::null_mut());
        cu::cuDeviceGet(&mut device, 0)?;
        cu::cuDevicePrimaryCtxRetain(&mut ctx, device)?;
        cu::cuCtxSetCurrent(ctx)?;
        cu::cuStreamCreate(&mut stream, cu::CUstream_flags::CU_STREAM_NON_BLOCKING.0)?;
        for _ in 0..LAUNCHES {
            cu::cuLaunchHostFunc(stream, Some(count_call), data)?;
        }
        cu::cuStreamSynchronize(stream)?;
        cu::cuStreamDestroy(stream)?;
        cu::cuDevicePrimaryCtxRelease(device)?;
    }
    let seen = calls.load(Ordering::SeqCst);
    expect("host function calls", LAUNCHES, seen)?;
    Ok(format!(
        "{LAUNCHES} cuLaunchHostFunc on a stream, host function ran {seen} times"
    ))
}

fn main() -> ExitCode {
    run("stream_callback", example)
}
