//! Interop with cudarc: host closures of the safe layer added to a stream, a capture and a graph
//! that cudarc made, in a non-primary context that cudarc created.
//!
//! cudarc's CUDA handles are wrapped, not owned: `Context::borrow_raw`, `Stream::borrow_raw`
//! and `Graph::borrow_raw`, one `as` cast per handle type. A cudarc copy and a closure of ours
//! are captured on cudarc's stream, and the graph replayed; the closure checks, on every replay,
//! the data the copies before it moved. Then a host node is added to cudarc's graph through the
//! safe layer, and the graph instantiated and launched again on the borrowed stream.
//!
//! It shows the capture pitfall first: cudarc's default event tracking makes every use of a
//! slice wait (`cuStreamWaitEvent`) on an event recorded before the capture, which CUDA refuses
//! with `CUDA_ERROR_STREAM_CAPTURE_ISOLATION` and which invalidates the capture. Call
//! `disable_event_tracking()` before making the slices a capture uses (and keep cudarc's
//! `PinnedHostSlice`, which always waits on its event, out of captures).
//! After a failed capture, clear cudarc's recorded errors (`check_err()`) before `end_capture`:
//! it returns a recorded error before calling `cuStreamEndCapture`, leaving the stream capturing.
//!
//! `cargo run -p cuda-hostcb-examples --example cudarc_interop`

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cuda_hostcb_examples::{Outcome, expect, run};
use cuda_hostcb_safe::CaptureStatus;
use cuda_hostcb_safe::{Context, Graph, Stream, sys};
use cudarc::driver::sys as cudarc_sys;
use cudarc::driver::{CudaContext, DevicePtr};

const LEN: usize = 1 << 16;
const REPLAYS: u32 = 5;
const LAUNCHES: u32 = 3;

/// Pinned host memory that the closure reads after the copies (freed at the end of `example`).
struct Pinned(*mut u32);

// SAFETY: the example keeps it alive until every launch that reads it has finished, and writes
// it only between launches, after synchronising.
unsafe impl Send for Pinned {}
// SAFETY: as above.
unsafe impl Sync for Pinned {}

impl Pinned {
    fn words(&self) -> &[u32] {
        // SAFETY: LEN words, allocated in `example`.
        unsafe { std::slice::from_raw_parts(self.0, LEN) }
    }
}

fn example() -> Outcome {
    // What another crate owns: a non-primary context and a stream, both cudarc's.
    let cctx = CudaContext::new_non_primary(0, 0)?;
    let cstream = cctx.new_stream()?;
    // SAFETY: cudarc keeps both alive until the end of this function, after our wrappers.
    let ctx = unsafe { Context::borrow_raw(cctx.cu_ctx() as sys::CUcontext) }?;
    let ours = unsafe { Stream::borrow_raw(cstream.cu_stream() as sys::CUstream) };
    expect("the borrowed context is primary", false, ctx.is_primary())?;

    let data: Vec<u32> = (0..LEN as u32).map(|i| i.wrapping_mul(3) + 1).collect();
    let want: u64 = data.iter().map(|&w| u64::from(w)).sum();

    // The pitfall: with event tracking (cudarc's default) a slice's use waits on its write
    // event, recorded before the capture began.
    let tracked = cstream.clone_htod(&data)?;
    cstream.synchronize()?;
    cstream.begin_capture(cudarc_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let (_, use_guard) = tracked.device_ptr(&cstream);
    let waited = cctx.check_err();
    let status = ours.capture_status()?;
    drop(use_guard);
    // A second pitfall: cudarc records the errors of the calls that followed (the guard's event
    // record) and its end_capture returns a recorded error before it calls cuStreamEndCapture,
    // which would leave the stream capturing. Take the recorded errors first.
    let _ = cctx.check_err();
    let ended = cstream.end_capture(cudarc_sys::CUgraphInstantiate_flags(0));
    let _ = cctx.check_err();
    expect(
        "the stream's capture status after end_capture",
        CaptureStatus::None,
        ours.capture_status()?,
    )?;
    expect(
        "cudarc's wait on a pre-capture event",
        Err(cudarc_sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION),
        waited.map_err(|e| e.0),
    )?;
    expect(
        "the capture status the safe layer saw",
        CaptureStatus::Invalidated,
        status,
    )?;
    expect(
        "a graph from the invalidated capture",
        true,
        !matches!(ended, Ok(Some(_))),
    )?;
    drop(tracked);

    // The fix: no event tracking for the slices the capture uses.
    // SAFETY: this example orders every use of these slices on one stream.
    unsafe { cctx.disable_event_tracking() };
    let src = cstream.clone_htod(&data)?;
    let mut dst = cstream.alloc_zeros::<u32>(LEN)?;
    let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
    ctx.make_current()?;
    // SAFETY: a valid out-pointer, in the current (cudarc's) context.
    unsafe { sys::cuMemAllocHost(&mut host, LEN * 4)? };
    let pinned = Arc::new(Pinned(host.cast()));
    cstream.synchronize()?;

    // Captured on cudarc's stream: cudarc's copy, our copy to pinned memory, our closure.
    let sums = Arc::new(Mutex::new(Vec::new()));
    cstream.begin_capture(cudarc_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = (|| -> Outcome {
        cstream.memcpy_dtod(&src, &mut dst)?;
        let (dptr, _guard) = dst.device_ptr(&cstream);
        // SAFETY: `dst` and the pinned buffer outlive the graph and its launches.
        unsafe { sys::cuMemcpyDtoHAsync(host, dptr, LEN * 4, ours.as_raw())? };
        let (p, log) = (Arc::clone(&pinned), Arc::clone(&sums));
        ours.launch_fn(move || {
            let sum: u64 = p.words().iter().map(|&w| u64::from(w)).sum();
            log.lock().unwrap_or_else(|e| e.into_inner()).push(sum);
        })?;
        Ok(String::new())
    })();
    let graph = cstream.end_capture(cudarc_sys::CUgraphInstantiate_flags(0));
    // The first failure inside the capture (it invalidates the capture, so end_capture fails too).
    captured.map_err(|e| format!("inside the capture: {e}"))?;
    let graph = graph?.ok_or("the capture gave no graph")?;

    for _ in 0..REPLAYS {
        // Zero the copy's destination, so each replay's closure sees only that replay's copy.
        // SAFETY: the stream is synchronised; nothing else touches the buffer now.
        unsafe { std::ptr::write_bytes(pinned.0, 0, LEN) };
        graph.launch()?;
        cstream.synchronize()?;
    }

    // A host node of ours in cudarc's graph, instantiated and launched by the safe layer.
    let launches = Arc::new(AtomicU32::new(0));
    let exec = {
        // SAFETY: cudarc keeps the graph alive, and nothing else uses it meanwhile.
        let theirs = unsafe { Graph::borrow_raw(graph.cu_graph() as sys::CUgraph, Some(&ctx)) };
        let n = Arc::clone(&launches);
        theirs.add_host_node(&[], move || {
            n.fetch_add(1, Ordering::SeqCst);
        })?;
        theirs.instantiate()?
    };
    for _ in 0..LAUNCHES {
        unsafe { std::ptr::write_bytes(pinned.0, 0, LEN) };
        exec.launch(&ours)?;
        ours.synchronize()?;
    }
    drop(exec);

    let sums = std::mem::take(&mut *sums.lock().unwrap_or_else(|e| e.into_inner()));
    let runs = (REPLAYS + LAUNCHES) as usize;
    expect("sums the captured closure saw", vec![want; runs], sums)?;
    expect(
        "calls of the node added to cudarc's graph",
        LAUNCHES,
        launches.load(Ordering::SeqCst),
    )?;
    drop((graph, ours, ctx));
    // SAFETY: every launch that reads the buffer has finished.
    unsafe { sys::cuMemFreeHost(host)? };
    Ok(format!(
        "cudarc's tracked slice invalidated the capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION); \
         untracked: cudarc copy + our closure captured on cudarc's stream in its non-primary \
         context, {REPLAYS} replays, then our node in cudarc's graph, {LAUNCHES} launches: the \
         closure saw the copied sum {want} all {runs} times"
    ))
}

fn main() -> ExitCode {
    run("cudarc_interop", example)
}
