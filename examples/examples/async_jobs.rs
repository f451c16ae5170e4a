//! Completion futures on a multi-thread tokio runtime: 1,000 concurrent jobs, each a kernel that
//! writes its value, a host closure (`Stream::launch`) that records its job, and an awaited
//! `Stream::completion`. The jobs share 16 streams; the checks run on the main thread after all
//! are done: every job completed, every closure ran once and before its job's completion
//! resolved, and every value is on the device.
//!
//! The safe layer depends on no executor: tokio is this example's dev-dependency only.
//!
//! `cargo run -p cuda-hostcb-examples --example async_jobs`

use std::ffi::{CStr, c_void};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cuda_hostcb_examples::newest::driver as sys;
use cuda_hostcb_examples::{Outcome, expect, run};
use cuda_hostcb_safe::{Context, Stream};

const JOBS: u32 = 1000;
const STREAMS: usize = 16;
const WORKERS: usize = 4;

/// `hostcb_fill(out, index, value)`: `out[index] = value`, one thread.
const PTX: &CStr = c".version 8.0
.target sm_75
.address_size 64

.visible .entry hostcb_fill(.param .u64 out, .param .u32 index, .param .u32 value)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<3>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [index];
    ld.param.u32 %r2, [value];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r2;
    ret;
}
";

/// The value job `i` writes.
fn value(i: u32) -> u32 {
    i.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995
}

/// A kernel handle that may cross threads (a `CUfunction` may be launched from any thread).
#[derive(Clone, Copy)]
struct Kernel(sys::CUfunction);
// SAFETY: see above; the module outlives every launch (it is unloaded after the runtime).
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

/// What the jobs record, checked on the main thread.
#[derive(Default)]
struct Seen {
    /// Host closure calls, and the sum of the job indices they saw.
    closure_calls: AtomicUsize,
    closure_sum: AtomicU64,
    /// Per job: 1 once its closure ran.
    ran: Vec<AtomicU32>,
    /// Jobs whose completion resolved `Ok`, and those whose closure had run by then.
    completed: AtomicUsize,
    ran_at_completion: AtomicUsize,
}

async fn job(
    i: u32,
    stream: &Mutex<Stream>,
    kernel: Kernel,
    out: sys::CUdeviceptr,
    seen: Arc<Seen>,
) -> Result<(), String> {
    let e = |e: cuda_hostcb_safe::Error| e.to_string();
    let completion = {
        let stream = stream.lock().unwrap_or_else(|p| p.into_inner());
        let (mut out, mut index, mut v) = (out, i, value(i));
        let mut params = [
            (&raw mut out).cast::<c_void>(),
            (&raw mut index).cast::<c_void>(),
            (&raw mut v).cast::<c_void>(),
        ];
        // SAFETY: a kernel of this context with three parameters of these types.
        unsafe {
            sys::cuLaunchKernel(
                kernel.0,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                stream.as_raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| e.to_string())?;
        let s = Arc::clone(&seen);
        stream
            .launch(move || {
                s.closure_calls.fetch_add(1, Ordering::SeqCst);
                s.closure_sum.fetch_add(u64::from(i), Ordering::SeqCst);
                s.ran[i as usize].fetch_add(1, Ordering::SeqCst);
            })
            .map_err(e)?;
        stream.completion().map_err(e)?
    };
    completion.await.map_err(e)?;
    seen.completed.fetch_add(1, Ordering::SeqCst);
    if seen.ran[i as usize].load(Ordering::SeqCst) == 1 {
        seen.ran_at_completion.fetch_add(1, Ordering::SeqCst);
    }
    Ok(())
}

fn example() -> Outcome {
    let ctx = Context::primary(0)?;
    ctx.make_current()?;
    let streams: Arc<Vec<Mutex<Stream>>> = Arc::new(
        (0..STREAMS)
            .map(|_| Stream::new(&ctx).map(Mutex::new))
            .collect::<Result<_, _>>()?,
    );
    let (mut module, mut kernel) = (std::ptr::null_mut(), std::ptr::null_mut());
    let mut out: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointers; the PTX is NUL-terminated.
    unsafe {
        sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast())?;
        sys::cuModuleGetFunction(&mut kernel, module, c"hostcb_fill".as_ptr())?;
        sys::cuMemAlloc(&mut out, JOBS as usize * 4)?;
        sys::cuMemsetD32(out, 0, JOBS as usize)?;
    }
    let kernel = Kernel(kernel);
    let seen = Arc::new(Seen {
        ran: (0..JOBS).map(|_| AtomicU32::new(0)).collect(),
        ..Seen::default()
    });

    let worker_ctx = ctx.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .on_thread_start(move || {
            // Each worker launches work: the context is current there.
            let _ = worker_ctx.make_current();
        })
        .build()?;
    let start = Instant::now();
    let handles: Vec<_> = (0..JOBS)
        .map(|i| {
            let (streams, seen) = (Arc::clone(&streams), Arc::clone(&seen));
            runtime.spawn(
                async move { job(i, &streams[i as usize % STREAMS], kernel, out, seen).await },
            )
        })
        .collect();
    let results: Vec<Result<(), String>> = runtime.block_on(async {
        let mut results = Vec::with_capacity(handles.len());
        for handle in handles {
            results.push(
                handle
                    .await
                    .unwrap_or_else(|e| Err(format!("the job failed: {e}"))),
            );
        }
        results
    });
    let elapsed = start.elapsed();
    drop(runtime);

    let mut device = vec![0u32; JOBS as usize];
    // SAFETY: `out` holds JOBS values; the host buffer as many.
    unsafe {
        sys::cuCtxSynchronize()?;
        sys::cuMemcpyDtoH(device.as_mut_ptr().cast(), out, JOBS as usize * 4)?;
        sys::cuMemFree(out)?;
        sys::cuModuleUnload(module)?;
    }
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    expect("jobs that failed", Vec::<&String>::new(), errors)?;
    let n = JOBS as usize;
    expect(
        "completions resolved Ok",
        n,
        seen.completed.load(Ordering::SeqCst),
    )?;
    expect(
        "host closure calls",
        n,
        seen.closure_calls.load(Ordering::SeqCst),
    )?;
    expect(
        "sum of the job indices the closures saw",
        u64::from(JOBS) * u64::from(JOBS - 1) / 2,
        seen.closure_sum.load(Ordering::SeqCst),
    )?;
    let once = seen
        .ran
        .iter()
        .filter(|r| r.load(Ordering::SeqCst) == 1)
        .count();
    expect("jobs whose closure ran exactly once", n, once)?;
    expect(
        "jobs whose closure had run when their completion resolved",
        n,
        seen.ran_at_completion.load(Ordering::SeqCst),
    )?;
    let right = (0..JOBS)
        .filter(|&i| device[i as usize] == value(i))
        .count();
    expect("values the kernels wrote", n, right)?;
    Ok(format!(
        "{JOBS} concurrent jobs on {WORKERS} tokio workers and {STREAMS} streams in {:.1} ms: \
         {} completions resolved, {} host closures ran (each before its completion), {right} \
         kernel values right",
        elapsed.as_secs_f64() * 1000.0,
        seen.completed.load(Ordering::SeqCst),
        seen.closure_calls.load(Ordering::SeqCst),
    ))
}

fn main() -> ExitCode {
    run("async_jobs", example)
}
