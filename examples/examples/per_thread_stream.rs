//! Per-thread default streams: `set_default_stream(DefaultStream::PerThread)` before the first
//! CUDA call resolves every function as its per-thread variant (`cuLaunchHostFunc_ptsz`, ...),
//! so the NULL stream is each host thread's own default stream, as with nvcc's
//! `--default-stream per-thread`. Four threads each launch a host function on it and
//! synchronise it.
//!
//! `cargo run -p cuda-hostcb-examples --example per_thread_stream`

use std::ffi::c_void;
use std::process::ExitCode;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

use cuda_hostcb::load::{DefaultStream, default_stream, set_default_stream};
use cuda_hostcb_examples::newest::driver as cu;
use cuda_hostcb_examples::{Outcome, expect, run};

/// Runs on a CUDA thread: only record (never panic, never call CUDA); the main thread checks.
unsafe extern "C" fn count_call(data: *mut c_void) {
    // SAFETY: `data` is the `AtomicU32` that `example` keeps alive until every thread is done.
    let calls = unsafe { &*data.cast::<AtomicU32>() };
    calls.fetch_add(1, Ordering::SeqCst);
}

/// On the calling thread: one host function on its default stream, then synchronise that stream.
fn launch_on_default_stream(calls: &AtomicU32) -> Result<(), cuda_hostcb::Error> {
    let data = ptr::from_ref(calls).cast_mut().cast::<c_void>();
    let default: cu::CUstream = ptr::null_mut(); // this thread's own, in per-thread mode
    // SAFETY: every handle comes from the call before; `calls` outlives the launch, since the
    // stream is synchronised before this returns.
    unsafe {
        let (mut device, mut ctx) = (0, ptr::null_mut());
        cu::cuDeviceGet(&mut device, 0)?;
        cu::cuDevicePrimaryCtxRetain(&mut ctx, device)?;
        cu::cuCtxSetCurrent(ctx)?;
        cu::cuLaunchHostFunc(default, Some(count_call), data)?;
        cu::cuStreamSynchronize(default)?;
        cu::cuDevicePrimaryCtxRelease(device)
    }
}

fn example() -> Outcome {
    const THREADS: u32 = 4;
    expect(
        "default stream mode",
        DefaultStream::PerThread,
        default_stream(),
    )?;
    let calls = AtomicU32::new(0);
    thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| scope.spawn(|| launch_on_default_stream(&calls)))
            .collect();
        threads.into_iter().try_for_each(|t| {
            t.join()
                .map_err(|_| "a thread panicked".to_owned())?
                .map_err(|e| e.to_string())
        })
    })?;
    let seen = calls.load(Ordering::SeqCst);
    expect("host function calls", THREADS, seen)?;
    Ok(format!(
        "{THREADS} threads launched on their per-thread default stream, host function ran {seen} times"
    ))
}

fn main() -> ExitCode {
    // Before the first CUDA call (`run` makes one to find the GPU).
    if let Err(e) = set_default_stream(DefaultStream::PerThread) {
        eprintln!("error: per_thread_stream: {e}");
        return ExitCode::FAILURE;
    }
    run("per_thread_stream", example)
}
