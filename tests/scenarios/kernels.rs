//! Scenario 10: a kernel, written here as PTX, loaded through the binding (`cuModuleLoadData` /
//! `cudaLibraryLoadData`) and launched before a host function that reads what it wrote: on a
//! stream with `cuLaunchKernel` / `cudaLaunchKernel` (once directly, then captured into a
//! graph), and as a kernel node (`cuGraphAddKernelNode` / `cudaGraphAddKernelNode`) followed by
//! a host node; each graph is replayed [`REPLAYS`] times.
//!
//! Each of the [`THREADS`] threads counts its runs in device memory and writes
//! `runs * MUL + thread` into page-locked host memory (device-accessible under unified
//! addressing); the host function only copies that output into a list. The test thread then
//! checks that call `n` saw exactly run `n`'s output: a host function that ran before the kernel
//! finished, or a kernel that did not run, shows up as stale or missing values.

use std::ffi::{CStr, c_void};
use std::marker::PhantomData;
use std::sync::Mutex;

use super::{lock, user_data};
use crate::binding::{Binding, Kernels, RawKernel, RawModule, Shape};
use crate::check::{Checker, During, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, DeviceBuffer, Graph, PinnedBuffer, Stream, note_cleanup_failure};

/// Threads of the one block.
pub const THREADS: usize = 32;
/// The factor of the run count in each output.
pub const MUL: u32 = 1000;
/// Replays of each graph.
pub const REPLAYS: usize = 100;
/// The kernel's name in [`PTX`].
pub const KERNEL: &CStr = c"hostcb_count";

/// `hostcb_count(u32 *counters, u32 *out, u32 mul)`: thread `t` adds one to `counters[t]` and
/// writes `counters[t] * mul + t` to `out[t]`. PTX ISA 8.0 for sm_75, which the CUDA 12 and 13
/// drivers JIT for any newer device.
pub const PTX: &CStr = c".version 8.0
.target sm_75
.address_size 64

.visible .entry hostcb_count(
    .param .u64 hostcb_count_param_0,
    .param .u64 hostcb_count_param_1,
    .param .u32 hostcb_count_param_2
)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [hostcb_count_param_0];
    ld.param.u64 %rd2, [hostcb_count_param_1];
    ld.param.u32 %r1, [hostcb_count_param_2];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u32 %r3, [%rd6];
    add.s32 %r4, %r3, 1;
    st.global.u32 [%rd6], %r4;
    mad.lo.s32 %r5, %r4, %r1, %r2;
    add.s64 %rd7, %rd4, %rd5;
    st.global.u32 [%rd7], %r5;
    ret;
}
";

/// One block of [`THREADS`] threads.
const SHAPE: Shape = Shape {
    grid: [1, 1, 1],
    block: [THREADS as u32, 1, 1],
};

/// What the host function copies out: the kernel's output at each call.
#[derive(Debug)]
struct Recorder {
    out: *const u32,
    seen: Mutex<Vec<Vec<u32>>>,
}

/// Copies the kernel's output into the [`Recorder`] that `data` points at; records only.
///
/// # Safety
/// `data` must point at a live [`Recorder`] whose `out` holds [`THREADS`] `u32`s.
unsafe extern "C" fn snapshot(data: *mut c_void) {
    // SAFETY: the caller passes a live `Recorder`; the kernel before this host function has
    // completed, and nothing writes `out` while it runs. Volatile: the device wrote it.
    let (recorder, output) = unsafe {
        let recorder = &*data.cast::<Recorder>();
        let output: Vec<u32> = (0..THREADS)
            .map(|t| recorder.out.add(t).read_volatile())
            .collect();
        (recorder, output)
    };
    lock(&recorder.seen).push(output);
}

/// Loaded PTX; unloaded when dropped.
struct Module<B: Binding> {
    kernels: Kernels,
    raw: RawModule,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> Module<B> {
    fn load(kernels: Kernels, image: &CStr) -> Result<Self, Failure> {
        // SAFETY: a NUL-terminated PTX image, in the current context.
        let raw = unsafe { (kernels.load)(image) }.during("load the PTX")?;
        Ok(Self {
            kernels,
            raw,
            _binding: PhantomData,
        })
    }

    fn kernel(&self, name: &CStr) -> Result<RawKernel, Failure> {
        // SAFETY: the module is live.
        unsafe { (self.kernels.kernel)(self.raw, name) }.during("find the kernel")
    }
}

impl<B: Binding> Drop for Module<B> {
    fn drop(&mut self) {
        // SAFETY: ours; every stream and graph using it is gone (declared after it).
        if let Err(source) = unsafe { (self.kernels.unload)(self.raw) } {
            note_cleanup_failure(&Failure::Cuda {
                step: "unload the PTX".to_owned(),
                source,
            });
        }
    }
}

/// What a run saw: the output each host-function call copied, in call order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Kernel runs the scenario enqueued (each followed by one host-function call).
    pub runs: usize,
    /// Per host-function call, the [`THREADS`] outputs it read.
    pub seen: Vec<Vec<u32>>,
}

/// The output of run `n` (1-based): thread `t` wrote `n * MUL + t`.
pub fn expected_output(n: usize) -> Vec<u32> {
    (0..THREADS as u32)
        .map(|t| (n as u32).wrapping_mul(MUL).wrapping_add(t))
        .collect()
}

/// The check: `expected_calls` host-function calls, call `n` seeing run `n`'s output. Reports
/// the count and, for the first few calls that saw something else, the first wrong thread.
pub fn check(expected_calls: usize, seen: &Observation) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq(
        format!("host-function calls after {} kernel runs", seen.runs),
        expected_calls,
        seen.seen.len(),
    );
    let mut wrong = 0;
    for (i, output) in seen.seen.iter().enumerate() {
        let want = expected_output(i + 1);
        if *output == want {
            continue;
        }
        wrong += 1;
        if wrong <= 3 {
            let t = (0..THREADS)
                .find(|&t| output.get(t) != want.get(t))
                .unwrap_or(0);
            c.eq(
                format!("output of thread {t} read by host-function call {}", i + 1),
                want.get(t).copied(),
                output.get(t).copied(),
            );
        }
    }
    c.eq("host-function calls that read a wrong output", 0, wrong);
    c.finish()
}

/// The device state one observation uses, in drop order: everything after `module` is gone
/// before it is unloaded.
fn setup<B: Binding>(kernels: Kernels) -> Result<(Module<B>, RawKernel), Failure> {
    let module = Module::<B>::load(kernels, PTX)?;
    let kernel = module.kernel(KERNEL)?;
    Ok((module, kernel))
}

/// The kernel launched on a stream with `cuLaunchKernel` / `cudaLaunchKernel`, each launch
/// followed by `cuLaunchHostFunc` / `cudaLaunchHostFunc`: once directly, then captured into a
/// graph that is replayed [`REPLAYS`] times.
pub fn observe_stream<B: Binding>(kernels: Kernels) -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let (_module, kernel) = setup::<B>(kernels)?;
    let counters = DeviceBuffer::<B>::new(THREADS * 4)?;
    let out = PinnedBuffer::<B>::new(THREADS * 4)?;
    let recorder = Recorder {
        out: out.as_ptr().cast_const().cast(),
        seen: Mutex::new(Vec::new()),
    };
    let stream = Stream::<B>::new()?;
    // SAFETY: the buffer is live until the stream is synchronised.
    unsafe { stream.memset(&counters, 0) }?;
    let (mut counters_at, mut out_at, mut mul) = (counters.ptr().0, out.as_ptr() as u64, MUL);
    let mut params: [*mut c_void; 3] = [
        (&raw mut counters_at).cast(),
        (&raw mut out_at).cast(),
        (&raw mut mul).cast(),
    ];
    let mut launch = |step: &str| -> Result<(), Failure> {
        // SAFETY: the module, buffers and parameter values outlive the stream's work (the
        // values are read at launch, or copied into the graph at capture).
        unsafe { (kernels.launch)(kernel, SHAPE, params.as_mut_ptr(), stream.raw()) }
            .during(step)?;
        // SAFETY: `recorder` outlives the stream, whose drop waits for its work.
        unsafe { stream.launch_host_func(snapshot, user_data(&recorder)) }
    };
    launch("launch the kernel on the stream")?;
    let capture = stream.begin_capture()?;
    launch("capture the kernel launch")?;
    let graph = capture.end()?;
    let exec = graph.instantiate()?;
    for _ in 0..REPLAYS {
        exec.launch(&stream)?;
    }
    stream.sync()?;
    let seen = std::mem::take(&mut *lock(&recorder.seen));
    Ok(Observation {
        runs: 1 + REPLAYS,
        seen,
    })
}

/// The kernel as a graph node (`cuGraphAddKernelNode` / `cudaGraphAddKernelNode`) with a host
/// node after it, the graph replayed [`REPLAYS`] times.
pub fn observe_node<B: Binding>(kernels: Kernels) -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let (_module, kernel) = setup::<B>(kernels)?;
    let counters = DeviceBuffer::<B>::new(THREADS * 4)?;
    let out = PinnedBuffer::<B>::new(THREADS * 4)?;
    let recorder = Recorder {
        out: out.as_ptr().cast_const().cast(),
        seen: Mutex::new(Vec::new()),
    };
    let stream = Stream::<B>::new()?;
    // SAFETY: the buffer is live until the stream is synchronised.
    unsafe { stream.memset(&counters, 0) }?;
    let (mut counters_at, mut out_at, mut mul) = (counters.ptr().0, out.as_ptr() as u64, MUL);
    let mut params: [*mut c_void; 3] = [
        (&raw mut counters_at).cast(),
        (&raw mut out_at).cast(),
        (&raw mut mul).cast(),
    ];
    let graph = Graph::<B>::new()?;
    // SAFETY: the graph is live; the parameter values are copied into the node.
    let kernel_node =
        unsafe { (kernels.add_node)(graph.raw(), &[], kernel, SHAPE, params.as_mut_ptr()) }
            .during("add the kernel node")?;
    // SAFETY: `recorder` outlives the graph's executable and the stream it runs on.
    unsafe { B::add_host_node_after(graph.raw(), &[kernel_node], snapshot, user_data(&recorder)) }
        .during("add the host node after the kernel node")?;
    let exec = graph.instantiate()?;
    for _ in 0..REPLAYS {
        exec.launch(&stream)?;
    }
    stream.sync()?;
    let seen = std::mem::take(&mut *lock(&recorder.seen));
    Ok(Observation {
        runs: REPLAYS,
        seen,
    })
}

fn run<B: Binding>(observe: fn(Kernels) -> Result<Observation, Failure>) -> Result<Ran, Failure> {
    let kernels = match B::kernels() {
        Ok(k) => k,
        Err(reason) => return Ok(Ran::Skipped(reason)),
    };
    let seen = observe(kernels)?;
    let expected = if wrong_expectations() {
        seen.runs + 1
    } else {
        seen.runs
    };
    check(expected, &seen)?;
    Ok(Ran::Passed)
}

/// The stream half: a direct launch, then a captured one replayed.
pub fn stream<B: Binding>() -> Result<Ran, Failure> {
    run::<B>(observe_stream::<B>)
}

/// The kernel-node half.
pub fn node<B: Binding>() -> Result<Ran, Failure> {
    run::<B>(observe_node::<B>)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(runs: usize) -> Observation {
        Observation {
            runs,
            seen: (1..=runs).map(expected_output).collect(),
        }
    }

    #[test]
    fn the_check_passes_every_run_seen_in_order() {
        assert_eq!(check(101, &observation(101)), Ok(()));
    }

    #[test]
    fn the_check_reports_a_host_function_that_read_before_the_kernel_wrote() {
        let mut seen = observation(100);
        // Call 5 read run 4's output (the kernel had not finished), call 6 a zeroed buffer.
        seen.seen[4] = expected_output(4);
        seen.seen[5] = vec![0; THREADS];
        assert_eq!(
            check(100, &seen).unwrap_err().to_string(),
            "output of thread 0 read by host-function call 5: expected Some(5000), seen Some(4000); \
             output of thread 0 read by host-function call 6: expected Some(6000), seen Some(0); \
             host-function calls that read a wrong output: expected 0, seen 2"
        );
    }

    #[test]
    fn the_check_reports_missing_calls() {
        let mut seen = observation(100);
        seen.seen.truncate(99);
        assert_eq!(
            check(100, &seen).unwrap_err().to_string(),
            "host-function calls after 100 kernel runs: expected 100, seen 99"
        );
    }

    #[test]
    fn the_kernel_is_ptx_the_driver_can_jit() {
        let text = PTX.to_str().unwrap();
        assert!(text.starts_with(".version 8.0\n.target sm_75\n"));
        assert!(text.contains(".visible .entry hostcb_count("));
        assert_eq!(expected_output(2)[3], 2003);
    }

    #[test]
    fn snapshot_copies_the_output() {
        let out: Vec<u32> = expected_output(7);
        let recorder = Recorder {
            out: out.as_ptr(),
            seen: Mutex::new(Vec::new()),
        };
        // SAFETY: `recorder` is live and `out` holds THREADS values.
        unsafe { snapshot(user_data(&recorder)) };
        assert_eq!(*lock(&recorder.seen), vec![out]);
    }
}
