//! The calls a host-callback figure needs, as one trait implemented for each generated target and
//! API, so that every figure's body is written once and monomorphised per (target, API).

use std::ffi::c_void;

use cuda_hostcb::Error;

/// A host function as both APIs take it (`CUhostFn` and `cudaHostFn_t` are this type).
pub type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// One generated target's driver or runtime API, reduced to the calls the figures make.
///
/// Each method is the generated wrapper of the C function it names, called directly, so a
/// figure measured through this trait measures the generated bindings.
pub trait HostApi {
    /// The target's module name, e.g. `ctk_13_0`.
    const TARGET: &'static str;
    /// `driver` or `runtime`.
    const API: &'static str;
    /// A stream handle.
    type Stream: Copy;
    /// A graph handle.
    type Graph: Copy;
    /// An executable graph handle.
    type Exec: Copy;
    /// A graph node handle.
    type Node: Copy;

    /// Makes device `ordinal` current on this thread (driver: `cuInit`, the primary context
    /// retained and set current; runtime: `cudaSetDevice`).
    fn bind(ordinal: i32) -> Result<(), Error>;
    /// Undoes [`bind`](Self::bind) (driver: releases the primary context; runtime: nothing).
    fn unbind(ordinal: i32) -> Result<(), Error>;

    /// Creates a non-blocking stream.
    ///
    /// # Safety
    /// A device must be bound on this thread.
    unsafe fn stream_create() -> Result<Self::Stream, Error>;
    /// Destroys a stream.
    ///
    /// # Safety
    /// `s` came from [`stream_create`](Self::stream_create) and is not used afterwards.
    unsafe fn stream_destroy(s: Self::Stream) -> Result<(), Error>;
    /// `cuLaunchHostFunc` / `cudaLaunchHostFunc`.
    ///
    /// # Safety
    /// `f` and `data` stay valid until the call has run.
    unsafe fn launch_host(s: Self::Stream, f: HostFn, data: *mut c_void) -> Result<(), Error>;
    /// `cuStreamSynchronize` / `cudaStreamSynchronize`.
    ///
    /// # Safety
    /// `s` is a live stream.
    unsafe fn stream_sync(s: Self::Stream) -> Result<(), Error>;
    /// Begins a global-mode capture on `s`.
    ///
    /// # Safety
    /// `s` is a live stream that is not capturing.
    unsafe fn capture_begin(s: Self::Stream) -> Result<(), Error>;
    /// Ends the capture on `s` and returns the captured graph.
    ///
    /// # Safety
    /// `s` is capturing.
    unsafe fn capture_end(s: Self::Stream) -> Result<Self::Graph, Error>;
    /// Creates an empty graph.
    ///
    /// # Safety
    /// A device must be bound on this thread.
    unsafe fn graph_create() -> Result<Self::Graph, Error>;
    /// Adds a host node to `g`, after `after` when given.
    ///
    /// # Safety
    /// `g` is live, `after` is a node of `g`; `f` and `data` outlive every launch of `g`.
    unsafe fn add_host_node(
        g: Self::Graph,
        after: Option<Self::Node>,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<Self::Node, Error>;
    /// Instantiates `g`.
    ///
    /// # Safety
    /// `g` is live.
    unsafe fn instantiate(g: Self::Graph) -> Result<Self::Exec, Error>;
    /// `cuGraphLaunch` / `cudaGraphLaunch`.
    ///
    /// # Safety
    /// `e` and `s` are live.
    unsafe fn graph_launch(e: Self::Exec, s: Self::Stream) -> Result<(), Error>;
    /// Destroys a graph.
    ///
    /// # Safety
    /// `g` is live and not used afterwards.
    unsafe fn graph_destroy(g: Self::Graph) -> Result<(), Error>;
    /// Destroys an executable graph.
    ///
    /// # Safety
    /// `e` is live, has no launch pending, and is not used afterwards.
    unsafe fn exec_destroy(e: Self::Exec) -> Result<(), Error>;
}

/// Implements [`HostApi`] for a target's driver API.
macro_rules! driver_api {
    ($name:ident, $target:ident) => {
        #[doc = concat!("The driver API of `cuda_hostcb::", stringify!($target), "`.")]
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl HostApi for $name {
            const TARGET: &'static str = stringify!($target);
            const API: &'static str = "driver";
            type Stream = cuda_hostcb::$target::driver::CUstream;
            type Graph = cuda_hostcb::$target::driver::CUgraph;
            type Exec = cuda_hostcb::$target::driver::CUgraphExec;
            type Node = cuda_hostcb::$target::driver::CUgraphNode;

            fn bind(ordinal: i32) -> Result<(), Error> {
                use cuda_hostcb::$target::driver as d;
                let mut dev: d::CUdevice = 0;
                let mut ctx: d::CUcontext = std::ptr::null_mut();
                // SAFETY: out-pointers to locals; the context is the device's primary one.
                unsafe {
                    d::cuInit(0)?;
                    d::cuDeviceGet(&mut dev, ordinal)?;
                    d::cuDevicePrimaryCtxRetain(&mut ctx, dev)?;
                    d::cuCtxSetCurrent(ctx)
                }
            }

            fn unbind(ordinal: i32) -> Result<(), Error> {
                use cuda_hostcb::$target::driver as d;
                let mut dev: d::CUdevice = 0;
                // SAFETY: releases the reference `bind` retained.
                unsafe {
                    d::cuDeviceGet(&mut dev, ordinal)?;
                    d::cuCtxSetCurrent(std::ptr::null_mut())?;
                    d::cuDevicePrimaryCtxRelease(dev)
                }
            }

            #[inline(always)]
            unsafe fn stream_create() -> Result<Self::Stream, Error> {
                use cuda_hostcb::$target::driver as d;
                let mut s: d::CUstream = std::ptr::null_mut();
                unsafe { d::cuStreamCreate(&mut s, d::CUstream_flags::CU_STREAM_NON_BLOCKING.0)? };
                Ok(s)
            }

            #[inline(always)]
            unsafe fn stream_destroy(s: Self::Stream) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::driver::cuStreamDestroy(s) }
            }

            #[inline(always)]
            unsafe fn launch_host(
                s: Self::Stream,
                f: HostFn,
                data: *mut std::ffi::c_void,
            ) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::driver::cuLaunchHostFunc(s, f, data) }
            }

            #[inline(always)]
            unsafe fn stream_sync(s: Self::Stream) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::driver::cuStreamSynchronize(s) }
            }

            #[inline(always)]
            unsafe fn capture_begin(s: Self::Stream) -> Result<(), Error> {
                use cuda_hostcb::$target::driver as d;
                unsafe {
                    d::cuStreamBeginCapture(
                        s,
                        d::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
                    )
                }
            }

            #[inline(always)]
            unsafe fn capture_end(s: Self::Stream) -> Result<Self::Graph, Error> {
                let mut g = std::ptr::null_mut();
                unsafe { cuda_hostcb::$target::driver::cuStreamEndCapture(s, &mut g)? };
                Ok(g)
            }

            #[inline(always)]
            unsafe fn graph_create() -> Result<Self::Graph, Error> {
                let mut g = std::ptr::null_mut();
                unsafe { cuda_hostcb::$target::driver::cuGraphCreate(&mut g, 0)? };
                Ok(g)
            }

            #[inline(always)]
            unsafe fn add_host_node(
                g: Self::Graph,
                after: Option<Self::Node>,
                f: HostFn,
                data: *mut std::ffi::c_void,
            ) -> Result<Self::Node, Error> {
                use cuda_hostcb::$target::driver as d;
                let params = d::CUDA_HOST_NODE_PARAMS {
                    fn_: f,
                    userData: data,
                };
                let mut node: d::CUgraphNode = std::ptr::null_mut();
                let (deps, n): (*const d::CUgraphNode, usize) = match after.as_ref() {
                    Some(prev) => (prev, 1),
                    None => (std::ptr::null(), 0),
                };
                unsafe { d::cuGraphAddHostNode(&mut node, g, deps, n, &params)? };
                Ok(node)
            }

            #[inline(always)]
            unsafe fn instantiate(g: Self::Graph) -> Result<Self::Exec, Error> {
                let mut e = std::ptr::null_mut();
                unsafe { cuda_hostcb::$target::driver::cuGraphInstantiate(&mut e, g, 0)? };
                Ok(e)
            }

            #[inline(always)]
            unsafe fn graph_launch(e: Self::Exec, s: Self::Stream) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::driver::cuGraphLaunch(e, s) }
            }

            #[inline(always)]
            unsafe fn graph_destroy(g: Self::Graph) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::driver::cuGraphDestroy(g) }
            }

            #[inline(always)]
            unsafe fn exec_destroy(e: Self::Exec) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::driver::cuGraphExecDestroy(e) }
            }
        }
    };
}

/// Implements [`HostApi`] for a target's runtime API.
macro_rules! runtime_api {
    ($name:ident, $target:ident) => {
        #[doc = concat!("The runtime API of `cuda_hostcb::", stringify!($target), "`.")]
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl HostApi for $name {
            const TARGET: &'static str = stringify!($target);
            const API: &'static str = "runtime";
            type Stream = cuda_hostcb::$target::runtime::cudaStream_t;
            type Graph = cuda_hostcb::$target::runtime::cudaGraph_t;
            type Exec = cuda_hostcb::$target::runtime::cudaGraphExec_t;
            type Node = cuda_hostcb::$target::runtime::cudaGraphNode_t;

            fn bind(ordinal: i32) -> Result<(), Error> {
                // SAFETY: plain call; the runtime makes the device's primary context current.
                unsafe { cuda_hostcb::$target::runtime::cudaSetDevice(ordinal) }
            }

            fn unbind(_ordinal: i32) -> Result<(), Error> {
                Ok(())
            }

            #[inline(always)]
            unsafe fn stream_create() -> Result<Self::Stream, Error> {
                use cuda_hostcb::$target::runtime as r;
                let mut s: r::cudaStream_t = std::ptr::null_mut();
                unsafe { r::cudaStreamCreateWithFlags(&mut s, r::cudaStreamNonBlocking)? };
                Ok(s)
            }

            #[inline(always)]
            unsafe fn stream_destroy(s: Self::Stream) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::runtime::cudaStreamDestroy(s) }
            }

            #[inline(always)]
            unsafe fn launch_host(
                s: Self::Stream,
                f: HostFn,
                data: *mut std::ffi::c_void,
            ) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::runtime::cudaLaunchHostFunc(s, f, data) }
            }

            #[inline(always)]
            unsafe fn stream_sync(s: Self::Stream) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::runtime::cudaStreamSynchronize(s) }
            }

            #[inline(always)]
            unsafe fn capture_begin(s: Self::Stream) -> Result<(), Error> {
                use cuda_hostcb::$target::runtime as r;
                unsafe {
                    r::cudaStreamBeginCapture(
                        s,
                        r::cudaStreamCaptureMode::cudaStreamCaptureModeGlobal,
                    )
                }
            }

            #[inline(always)]
            unsafe fn capture_end(s: Self::Stream) -> Result<Self::Graph, Error> {
                let mut g = std::ptr::null_mut();
                unsafe { cuda_hostcb::$target::runtime::cudaStreamEndCapture(s, &mut g)? };
                Ok(g)
            }

            #[inline(always)]
            unsafe fn graph_create() -> Result<Self::Graph, Error> {
                let mut g = std::ptr::null_mut();
                unsafe { cuda_hostcb::$target::runtime::cudaGraphCreate(&mut g, 0)? };
                Ok(g)
            }

            #[inline(always)]
            unsafe fn add_host_node(
                g: Self::Graph,
                after: Option<Self::Node>,
                f: HostFn,
                data: *mut std::ffi::c_void,
            ) -> Result<Self::Node, Error> {
                use cuda_hostcb::$target::runtime as r;
                let params = r::cudaHostNodeParams {
                    fn_: f,
                    userData: data,
                };
                let mut node: r::cudaGraphNode_t = std::ptr::null_mut();
                let (deps, n): (*const r::cudaGraphNode_t, usize) = match after.as_ref() {
                    Some(prev) => (prev, 1),
                    None => (std::ptr::null(), 0),
                };
                unsafe { r::cudaGraphAddHostNode(&mut node, g, deps, n, &params)? };
                Ok(node)
            }

            #[inline(always)]
            unsafe fn instantiate(g: Self::Graph) -> Result<Self::Exec, Error> {
                let mut e = std::ptr::null_mut();
                unsafe { cuda_hostcb::$target::runtime::cudaGraphInstantiate(&mut e, g, 0)? };
                Ok(e)
            }

            #[inline(always)]
            unsafe fn graph_launch(e: Self::Exec, s: Self::Stream) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::runtime::cudaGraphLaunch(e, s) }
            }

            #[inline(always)]
            unsafe fn graph_destroy(g: Self::Graph) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::runtime::cudaGraphDestroy(g) }
            }

            #[inline(always)]
            unsafe fn exec_destroy(e: Self::Exec) -> Result<(), Error> {
                unsafe { cuda_hostcb::$target::runtime::cudaGraphExecDestroy(e) }
            }
        }
    };
}

driver_api!(Driver12_9, ctk_12_9);
runtime_api!(Runtime12_9, ctk_12_9);
driver_api!(Driver13_0, ctk_13_0);
runtime_api!(Runtime13_0, ctk_13_0);
driver_api!(Driver13_5, ctk_13_5);
runtime_api!(Runtime13_5, ctk_13_5);
