//! The CUDA operations the scenarios need, as one trait that every target × API implements
//! (see [`crate::bindings`]), so each scenario is written once.

use std::ffi::{CStr, c_void};

use cuda_hostcb::Error;

/// A host function as both APIs take it (`CUhostFn` and `cudaHostFn_t` without the `Option`).
pub type HostFn = unsafe extern "C" fn(*mut c_void);

/// Which API of a target a binding calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// The driver API (`cu*`, `libcuda.so.1`).
    Driver,
    /// The runtime API (`cuda*`, `libcudart.so.<major>`).
    Runtime {
        /// The runtime's major version: 12 for the 12.9 target, 13 for the 13.x ones.
        major: u32,
    },
}

impl Api {
    /// The module name, as in trial names: `driver` or `runtime`.
    pub const fn module(self) -> &'static str {
        match self {
            Api::Driver => "driver",
            Api::Runtime { .. } => "runtime",
        }
    }
}

macro_rules! handles {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub *mut c_void);
    )*};
}

handles! {
    /// A context (`CUcontext`); null for the runtime API, which keeps its own.
    RawContext;
    /// A stream (`CUstream`, `cudaStream_t`).
    RawStream;
    /// A graph (`CUgraph`, `cudaGraph_t`).
    RawGraph;
    /// An executable graph (`CUgraphExec`, `cudaGraphExec_t`).
    RawExec;
    /// A graph node (`CUgraphNode`, `cudaGraphNode_t`).
    RawNode;
    /// An event (`CUevent`, `cudaEvent_t`).
    RawEvent;
    /// A user object (`CUuserObject`, `cudaUserObject_t`).
    RawUserObject;
    /// Loaded device code (`CUmodule`, `cudaLibrary_t`).
    RawModule;
    /// A kernel of loaded device code (`CUfunction`, `cudaKernel_t`).
    RawKernel;
}

/// The grid and block of a kernel launch (no dynamic shared memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
}

/// How one binding loads a kernel from PTX and launches it, as plain function pointers, so
/// that a binding whose API cannot (a runtime that declares no `cudaLibraryLoadData`) offers
/// none and says why ([`Binding::kernels`]).
///
/// Every function is `unsafe`: handles must be live and belong to the current context, and
/// `params` must point at one pointer per kernel parameter, each at a value of the parameter's
/// type, for the duration of the call.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// Loads a NUL-terminated PTX image (`cuModuleLoadData`, `cudaLibraryLoadData`).
    pub load: unsafe fn(image: &CStr) -> Result<RawModule, Error>,
    /// Finds a kernel by name (`cuModuleGetFunction`, `cudaLibraryGetKernel`).
    pub kernel: unsafe fn(module: RawModule, name: &CStr) -> Result<RawKernel, Error>,
    /// Unloads the code (`cuModuleUnload`, `cudaLibraryUnload`).
    pub unload: unsafe fn(module: RawModule) -> Result<(), Error>,
    /// Launches on a stream (`cuLaunchKernel`, `cudaLaunchKernel`).
    pub launch: LaunchKernel,
    /// Adds a kernel node after every node of `deps` (`cuGraphAddKernelNode`,
    /// `cudaGraphAddKernelNode`); the parameter values are copied into the node.
    pub add_node: AddKernelNode,
}

/// [`Kernels::launch`]: `(kernel, shape, params, stream)`.
pub type LaunchKernel =
    unsafe fn(RawKernel, Shape, *mut *mut c_void, RawStream) -> Result<(), Error>;

/// [`Kernels::add_node`]: `(graph, deps, kernel, shape, params)`, the new node.
pub type AddKernelNode =
    unsafe fn(RawGraph, &[RawNode], RawKernel, Shape, *mut *mut c_void) -> Result<RawNode, Error>;

/// A device address (`CUdeviceptr`, or a runtime `void *` on the device); never dereferenced
/// on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

/// The operations of one target × API that the scenarios use, each a thin call of the
/// generated wrapper of that target's module.
///
/// Functions that take raw handles are `unsafe`: each handle must be live and belong to the
/// context current on the calling thread. [`crate::resources`] wraps them in owning types.
pub trait Binding: 'static {
    /// The target's module, e.g. `ctk_13_0`.
    const TARGET: &'static str;
    /// The API this binding calls.
    const API: Api;

    /// `ctk_13_0::driver`: the prefix of this binding's trial names.
    fn name() -> String {
        format!("{}::{}", Self::TARGET, Self::API.module())
    }

    /// The installed driver's version, through this binding (`cuDriverGetVersion` or
    /// `cudaDriverGetVersion`).
    fn driver_version() -> Result<u32, Error>;
    /// The runtime's version (`cudaRuntimeGetVersion`); `None` for the driver API.
    fn runtime_version() -> Option<Result<u32, Error>>;
    /// How many devices this API sees.
    fn device_count() -> Result<usize, Error>;

    /// Makes `device` usable on this thread. Driver: `cuInit`, retain the primary context and
    /// make it current. Runtime: `cudaSetDevice`.
    fn enter(device: usize) -> Result<RawContext, Error>;
    /// Makes a context from [`Binding::enter`] current again.
    ///
    /// # Safety
    /// `ctx` must come from `enter(device)` and not have been left.
    unsafe fn make_current(ctx: RawContext, device: usize) -> Result<(), Error>;
    /// Undoes [`Binding::enter`]: the driver releases the primary context.
    ///
    /// # Safety
    /// `ctx` must come from `enter(device)`; it must not be used afterwards.
    unsafe fn leave(ctx: RawContext, device: usize) -> Result<(), Error>;

    /// Creates a non-blocking stream.
    fn stream_create() -> Result<RawStream, Error>;
    /// Destroys a stream.
    ///
    /// # Safety
    /// `stream` must be live; it is dead afterwards.
    unsafe fn stream_destroy(stream: RawStream) -> Result<(), Error>;
    /// Waits for everything enqueued on `stream`.
    ///
    /// # Safety
    /// `stream` must be live.
    unsafe fn stream_synchronize(stream: RawStream) -> Result<(), Error>;
    /// Starts capturing `stream` in thread-local mode (other threads' calls are unaffected).
    ///
    /// # Safety
    /// `stream` must be live and not capturing.
    unsafe fn begin_capture(stream: RawStream) -> Result<(), Error>;
    /// Ends the capture of `stream`, returning the captured graph.
    ///
    /// # Safety
    /// `stream` must be capturing.
    unsafe fn end_capture(stream: RawStream) -> Result<RawGraph, Error>;

    /// `cuLaunchHostFunc` / `cudaLaunchHostFunc`.
    ///
    /// # Safety
    /// `stream` must be live; `f(data)` must be sound to call from a driver thread for as long
    /// as any launch that can call it (a stream launch, or every replay of a graph captured
    /// from it) is pending.
    unsafe fn launch_host_func(
        stream: RawStream,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Error>;
    /// `cuStreamAddCallback` / `cudaStreamAddCallback` with this binding's recording callback,
    /// which passes what it sees to [`crate::scenarios::stream_callbacks::record`].
    ///
    /// # Safety
    /// `stream` must be live; `data` must point at a
    /// [`Tag`](crate::scenarios::stream_callbacks::Tag) that outlives the callback.
    unsafe fn add_recording_callback(stream: RawStream, data: *mut c_void) -> Result<(), Error>;

    /// Creates an empty graph.
    fn graph_create() -> Result<RawGraph, Error>;
    /// Destroys a graph.
    ///
    /// # Safety
    /// `graph` must be live; it is dead afterwards.
    unsafe fn graph_destroy(graph: RawGraph) -> Result<(), Error>;
    /// Instantiates `graph` with no flags.
    ///
    /// # Safety
    /// `graph` must be live.
    unsafe fn instantiate(graph: RawGraph) -> Result<RawExec, Error>;
    /// Destroys an executable graph (CUDA defers it until its pending launches finish).
    ///
    /// # Safety
    /// `exec` must be live; it is dead afterwards.
    unsafe fn exec_destroy(exec: RawExec) -> Result<(), Error>;
    /// Launches `exec` on `stream`.
    ///
    /// # Safety
    /// Both must be live, and every host function in `exec` callable (see
    /// [`Binding::launch_host_func`]).
    unsafe fn graph_launch(exec: RawExec, stream: RawStream) -> Result<(), Error>;

    /// Adds a host node with no dependencies: [`Binding::add_host_node_after`] with none.
    ///
    /// # Safety
    /// `graph` must be live; `f(data)` as for [`Binding::launch_host_func`].
    #[inline(always)]
    unsafe fn add_host_node(
        graph: RawGraph,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<RawNode, Error> {
        // SAFETY: forwarded from the caller; no dependencies.
        unsafe { Self::add_host_node_after(graph, &[], f, data) }
    }
    /// Adds a host node that runs after every node in `deps` (none: a root node).
    ///
    /// # Safety
    /// `graph` must be live and every node of `deps` a node of it; `f(data)` as for
    /// [`Binding::launch_host_func`].
    unsafe fn add_host_node_after(
        graph: RawGraph,
        deps: &[RawNode],
        f: HostFn,
        data: *mut c_void,
    ) -> Result<RawNode, Error>;
    /// Reads a host node's function and user data back.
    ///
    /// # Safety
    /// `node` must be a live host node.
    unsafe fn host_node_params(node: RawNode) -> Result<(Option<HostFn>, *mut c_void), Error>;
    /// `...GraphHostNodeSetParams`: changes a host node of a graph.
    ///
    /// # Safety
    /// `node` must be a live host node; `f(data)` as for [`Binding::launch_host_func`].
    unsafe fn set_host_node_params(
        node: RawNode,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Error>;
    /// `...GraphExecHostNodeSetParams`: changes a host node in an executable graph.
    ///
    /// # Safety
    /// `exec` must be live and instantiated from the graph holding `node`; `f(data)` as for
    /// [`Binding::launch_host_func`].
    unsafe fn exec_set_host_node_params(
        exec: RawExec,
        node: RawNode,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Error>;

    /// Creates a user object with one reference and the required
    /// `..._NO_DESTRUCTOR_SYNC` flag; `destroy(ptr)` runs when the last reference goes.
    ///
    /// # Safety
    /// `destroy(ptr)` must be sound to call from a driver thread at any later time.
    unsafe fn user_object_create(ptr: *mut c_void, destroy: HostFn)
    -> Result<RawUserObject, Error>;
    /// Moves the caller's one reference of `object` into `graph` (`..._USER_OBJECT_MOVE`).
    ///
    /// # Safety
    /// Both must be live, and the caller must own one reference, which it gives up.
    unsafe fn graph_move_user_object(graph: RawGraph, object: RawUserObject) -> Result<(), Error>;
    /// Releases one reference of `object`.
    ///
    /// # Safety
    /// The caller must own one reference, which it gives up.
    unsafe fn user_object_release(object: RawUserObject) -> Result<(), Error>;

    /// Allocates `bytes` of device memory.
    fn mem_alloc(bytes: usize) -> Result<DevicePtr, Error>;
    /// Frees device memory.
    ///
    /// # Safety
    /// `ptr` must come from [`Binding::mem_alloc`] and not be in use.
    unsafe fn mem_free(ptr: DevicePtr) -> Result<(), Error>;
    /// Allocates `bytes` of page-locked host memory.
    fn host_alloc(bytes: usize) -> Result<*mut c_void, Error>;
    /// Frees page-locked host memory.
    ///
    /// # Safety
    /// `ptr` must come from [`Binding::host_alloc`] and not be in use.
    unsafe fn host_free(ptr: *mut c_void) -> Result<(), Error>;
    /// Sets `bytes` bytes at `dst` to `value`, in stream order.
    ///
    /// # Safety
    /// `dst` must hold `bytes` bytes until the work is done; `stream` must be live.
    unsafe fn memset_d8_async(
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: RawStream,
    ) -> Result<(), Error>;
    /// Copies `bytes` bytes from the device to page-locked host memory, in stream order.
    ///
    /// # Safety
    /// Both regions must hold `bytes` bytes until the work is done; `stream` must be live.
    unsafe fn copy_to_host_async(
        dst: *mut c_void,
        src: DevicePtr,
        bytes: usize,
        stream: RawStream,
    ) -> Result<(), Error>;
    /// Copies `bytes` bytes from page-locked host memory to the device, in stream order.
    ///
    /// # Safety
    /// Both regions must hold `bytes` bytes until the work is done; `stream` must be live.
    unsafe fn copy_to_device_async(
        dst: DevicePtr,
        src: *const c_void,
        bytes: usize,
        stream: RawStream,
    ) -> Result<(), Error>;

    /// Creates an event without timing.
    fn event_create() -> Result<RawEvent, Error>;
    /// Destroys an event.
    ///
    /// # Safety
    /// `event` must be live; it is dead afterwards.
    unsafe fn event_destroy(event: RawEvent) -> Result<(), Error>;
    /// Records `event` on `stream`.
    ///
    /// # Safety
    /// Both must be live.
    unsafe fn event_record(event: RawEvent, stream: RawStream) -> Result<(), Error>;
    /// Whether the work before `event` has completed (`NOT_READY` is `Ok(false)`).
    ///
    /// # Safety
    /// `event` must be live.
    unsafe fn event_is_complete(event: RawEvent) -> Result<bool, Error>;

    /// This binding's kernel loading and launches, or why its API of its target has none.
    fn kernels() -> Result<Kernels, String>;
}

/// The 13.1 host-function launch with a sync mode, declared only by the 13.5 target.
pub trait HostFuncV2: Binding {
    /// The wrapper's name, as [`Error::Unavailable`] reports it.
    const FUNCTION: &'static str;
    /// Every sync mode the target declares, by its constant's name.
    const SYNC_MODES: &'static [(&'static str, u32)];

    /// `cuLaunchHostFunc_v2` / `cudaLaunchHostFunc_v2`.
    ///
    /// # Safety
    /// As for [`Binding::launch_host_func`].
    unsafe fn launch_host_func_v2(
        stream: RawStream,
        f: HostFn,
        data: *mut c_void,
        sync_mode: u32,
    ) -> Result<(), Error>;
}

/// The `CUresult` / `cudaError_t` value of "not ready" (`CUDA_ERROR_NOT_READY`,
/// `cudaErrorNotReady`), the same in both APIs.
pub const NOT_READY: u32 = 600;
