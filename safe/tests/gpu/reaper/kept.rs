//! A graph that owns the buffer its kernel reads (`Graph::keep`, `Stream::keep_in_capture`):
//! the program moves the buffer into the graph and drops its own graph handle; the executable's
//! launches still read and write the buffer, which is freed once, on the reaper thread, only
//! after the executable is gone.

use std::ffi::{CStr, c_void};
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use cuda_hostcb_safe::{self as safe, CaptureMode, sys, wait_for_drops};
use hostcb_gate::expect_eq;
use hostcb_gate::trials::{Failed, Outcome, Watchdog, done, wait_until};

use super::{Buffer, Log, current};

/// `hostcb_bump(u32 *kept, u32 *out)`: `kept[0] += 1; out[0] = kept[0]`. PTX ISA 8.0 for sm_75,
/// which the CUDA 12 and 13 drivers JIT for any newer device.
const PTX: &CStr = c".version 8.0
.target sm_75
.address_size 64

.visible .entry hostcb_bump(
    .param .u64 hostcb_bump_param_0,
    .param .u64 hostcb_bump_param_1
)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [hostcb_bump_param_0];
    ld.param.u64 %rd2, [hostcb_bump_param_1];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    ld.global.u32 %r1, [%rd3];
    add.s32 %r2, %r1, 1;
    st.global.u32 [%rd3], %r2;
    st.global.u32 [%rd4], %r2;
    ret;
}
";

/// Launches of the executable.
const LAUNCHES: u32 = 5;

/// How the graph comes to own the buffer.
#[derive(Clone, Copy, Debug)]
pub enum Way {
    /// A kernel node added to a graph, then `Graph::keep`.
    Node,
    /// A kernel launch captured from a stream, then `Stream::keep_in_capture`.
    Capture,
}

/// The kernel, loaded; unloaded on drop.
struct Kernel {
    module: sys::CUmodule,
    function: sys::CUfunction,
}

impl Kernel {
    fn load() -> Result<Kernel, Failed> {
        let (mut module, mut function) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: a NUL-terminated PTX image and valid out-pointers, in the current context.
        unsafe {
            sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast())?;
            sys::cuModuleGetFunction(&mut function, module, c"hostcb_bump".as_ptr())?;
        }
        Ok(Kernel { module, function })
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: the module this value loaded; nothing uses it after.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

/// Device memory of the test itself (the kernel's output), freed on drop.
struct Out(sys::CUdeviceptr);

impl Drop for Out {
    fn drop(&mut self) {
        // SAFETY: memory this value allocated.
        let _ = unsafe { sys::cuMemFree(self.0) };
    }
}

pub fn trial(way: Way) -> Outcome {
    let _watchdog = Watchdog::arm(format!("kept buffer ({way:?})"), Duration::from_secs(60));
    let ctx = current()?;
    let stream = safe::Stream::new(&ctx)?;
    let log = Arc::new(Log::default());
    let kernel = Kernel::load()?;
    let kept = Buffer::new(&ctx, &log)?;
    let mut out = Out(0);
    // SAFETY: valid out-pointer and device memory of at least 4 bytes, in the current context.
    unsafe {
        sys::cuMemAlloc(&mut out.0, 4)?;
        sys::cuMemsetD32(kept.ptr, 0, 1)?;
        sys::cuMemsetD32(out.0, 0, 1)?;
    }
    // The kernel's parameters: CUDA copies the values they point to when the node is made or the
    // launch is captured.
    let (mut kept_ptr, mut out_ptr) = (kept.ptr, out.0);
    let mut params: [*mut c_void; 2] = [(&raw mut kept_ptr).cast(), (&raw mut out_ptr).cast()];
    let graph = match way {
        Way::Node => {
            let graph = safe::Graph::new(&ctx)?;
            // SAFETY: all-zero is a valid CUDA_KERNEL_NODE_PARAMS (no kern, no ctx).
            let mut node: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
            node.func = kernel.function;
            (node.gridDimX, node.gridDimY, node.gridDimZ) = (1, 1, 1);
            (node.blockDimX, node.blockDimY, node.blockDimZ) = (1, 1, 1);
            node.kernelParams = params.as_mut_ptr();
            let mut raw: sys::CUgraphNode = ptr::null_mut();
            // SAFETY: a valid graph, no dependencies, valid parameters and out-pointer.
            unsafe { sys::cuGraphAddKernelNode(&mut raw, graph.as_raw(), ptr::null(), 0, &node)? };
            graph.keep(kept)?;
            graph
        }
        Way::Capture => {
            stream.begin_capture(CaptureMode::ThreadLocal)?;
            // SAFETY: a loaded kernel of these two pointer parameters, on the capturing stream.
            let launched = unsafe {
                sys::cuLaunchKernel(
                    kernel.function,
                    1,
                    1,
                    1,
                    1,
                    1,
                    1,
                    0,
                    stream.as_raw(),
                    params.as_mut_ptr(),
                    ptr::null_mut(),
                )
            };
            let kept_in = stream.keep_in_capture(kept);
            let graph = stream.end_capture()?;
            launched?;
            kept_in?;
            graph
        }
    };
    // The program's own handles are gone: the buffer moved into the graph, and the graph goes.
    let exec = graph.instantiate()?;
    drop(graph);
    let mut seen = Vec::new();
    for _ in 0..LAUNCHES {
        exec.launch(&stream)?;
        stream.synchronize()?;
        let mut value = 0u32;
        // SAFETY: 4 bytes of device memory into a local, the stream's work done.
        unsafe { sys::cuMemcpyDtoH((&raw mut value).cast(), out.0, 4)? };
        seen.push(value);
    }
    wait_for_drops()?;
    let drops_while_held = log.drops.load(SeqCst);
    drop(exec);
    wait_until(Duration::from_secs(20), || log.drops.load(SeqCst) >= 1);
    wait_for_drops()?;
    expect_eq(
        "each launch read and wrote the kept buffer",
        (1..=LAUNCHES).collect::<Vec<_>>(),
        seen.clone(),
    )?;
    expect_eq(
        "drops while the executable held the buffer",
        0,
        drops_while_held,
    )?;
    expect_eq("drops after", 1, log.drops.load(SeqCst))?;
    expect_eq("frees that succeeded", 1, log.frees_ok.load(SeqCst))?;
    expect_eq("drops on the reaper thread", 1, log.on_reaper.load(SeqCst))?;
    println!(
        "kept buffer ({way:?}): the launches read {seen:?}; freed once, on the reaper, after the executable"
    );
    drop(kernel);
    done()
}
