//! [`Binding`](crate::binding::Binding) for every target × API, each generated from one macro
//! body (`binding!`) that takes what differs between the APIs (the module, the type, function
//! and flag names, and the few methods each API writes its own way), so the bindings differ only
//! in what they call.

use std::ffi::{c_int, c_void};
use std::ptr;

use crate::binding::DevicePtr;

/// A device ordinal as CUDA takes it; one past `c_int::MAX` fails in CUDA, not here.
fn ordinal(device: usize) -> c_int {
    c_int::try_from(device).unwrap_or(c_int::MAX)
}

/// A count or version CUDA returned as `int`; a negative one reads as 0.
fn unsigned(value: c_int) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// `Ok(true)` for success, `Ok(false)` for "not ready", the error otherwise.
fn completion(result: Result<(), cuda_hostcb::Error>) -> Result<bool, cuda_hostcb::Error> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.code() == Some(crate::binding::NOT_READY) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A device address as the runtime takes it; never dereferenced on the host.
fn device(ptr: DevicePtr) -> *mut c_void {
    ptr::without_provenance_mut(ptr.0 as usize)
}

/// Passes what a stream callback saw on to the scenario's recorder.
///
/// # Safety
/// As for [`crate::scenarios::stream_callbacks::record`].
unsafe fn record_callback(stream: *mut c_void, status: u32, data: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { crate::scenarios::stream_callbacks::record(stream, status, data) }
}

/// One API's binding for the target module `$target`: the unit struct `$binding`, its recording
/// stream callback `$callback` and its `Binding` impl, written once for both APIs. What differs
/// is passed in: the API's module (`$m`), its type and constant names, the functions of the
/// calls both APIs make alike, and the methods each API writes its own way (`own`: versions,
/// devices and contexts, device memory and copies, kernels).
macro_rules! binding {
    (
        $target:ident :: $api:ident as $m:ident, $binding:ident, $api_value:expr, $callback:ident;
        types {
            stream: $Stream:ident,
            status: $Status:ident,
            graph_node: $GraphNode:ident,
            host_node_params: $HostNodeParams:ident $(,)?
        }
        flags {
            stream_non_blocking: $stream_non_blocking:expr,
            capture_thread_local: $capture_thread_local:expr,
            user_object_no_destructor_sync: $no_destructor_sync:expr,
            graph_user_object_move: $user_object_move:expr,
            event_disable_timing: $event_disable_timing:expr $(,)?
        }
        calls {
            driver_get_version: $driver_get_version:ident,
            stream_create: $stream_create:ident,
            stream_destroy: $stream_destroy:ident,
            stream_synchronize: $stream_synchronize:ident,
            stream_begin_capture: $stream_begin_capture:ident,
            stream_end_capture: $stream_end_capture:ident,
            launch_host_func: $launch_host_func:ident,
            stream_add_callback: $stream_add_callback:ident,
            graph_create: $graph_create:ident,
            graph_destroy: $graph_destroy:ident,
            graph_instantiate: $graph_instantiate:ident,
            graph_exec_destroy: $graph_exec_destroy:ident,
            graph_launch: $graph_launch:ident,
            graph_add_host_node: $graph_add_host_node:ident,
            graph_host_node_get_params: $graph_host_node_get_params:ident,
            graph_host_node_set_params: $graph_host_node_set_params:ident,
            graph_exec_host_node_set_params: $graph_exec_host_node_set_params:ident,
            user_object_create: $user_object_create:ident,
            graph_retain_user_object: $graph_retain_user_object:ident,
            user_object_release: $user_object_release:ident,
            host_alloc: $host_alloc:ident,
            host_free: $host_free:ident,
            event_create: $event_create:ident,
            event_destroy: $event_destroy:ident,
            event_record: $event_record:ident,
            event_query: $event_query:ident $(,)?
        }
        own { $($own:tt)* }
    ) => {
        use cuda_hostcb::$target::$api as $m;

        #[doc = concat!("This target's ", stringify!($api), " API.")]
        #[derive(Debug)]
        pub struct $binding;

        /// The recording stream callback: it only passes its arguments on.
        unsafe extern "C" fn $callback(
            stream: $m::$Stream,
            status: $m::$Status,
            data: *mut c_void,
        ) {
            // SAFETY: `add_recording_callback` requires `data` to point at a live `Tag`.
            unsafe { record_callback(stream.cast(), status.0, data) }
        }

        impl Binding for $binding {
            const TARGET: &'static str = stringify!($target);
            const API: Api = $api_value;

            fn driver_version() -> Result<u32, Error> {
                let mut v = 0;
                // SAFETY: `v` is valid for writes.
                unsafe { $m::$driver_get_version(&mut v) }?;
                Ok(unsigned(v))
            }

            #[inline(always)]
            fn stream_create() -> Result<RawStream, Error> {
                let mut s = ptr::null_mut();
                // SAFETY: `s` is valid for writes.
                unsafe { $m::$stream_create(&mut s, $stream_non_blocking) }?;
                Ok(RawStream(s.cast()))
            }

            #[inline(always)]
            unsafe fn stream_destroy(stream: RawStream) -> Result<(), Error> {
                // SAFETY: the caller's handle.
                unsafe { $m::$stream_destroy(stream.0.cast()) }
            }

            #[inline(always)]
            unsafe fn stream_synchronize(stream: RawStream) -> Result<(), Error> {
                // SAFETY: the caller's handle.
                unsafe { $m::$stream_synchronize(stream.0.cast()) }
            }

            #[inline(always)]
            unsafe fn begin_capture(stream: RawStream) -> Result<(), Error> {
                // SAFETY: the caller's handle.
                unsafe { $m::$stream_begin_capture(stream.0.cast(), $capture_thread_local) }
            }

            #[inline(always)]
            unsafe fn end_capture(stream: RawStream) -> Result<RawGraph, Error> {
                let mut g = ptr::null_mut();
                // SAFETY: the caller's handle; `g` is valid for writes.
                unsafe { $m::$stream_end_capture(stream.0.cast(), &mut g) }?;
                Ok(RawGraph(g.cast()))
            }

            #[inline(always)]
            unsafe fn launch_host_func(
                stream: RawStream,
                f: HostFn,
                data: *mut c_void,
            ) -> Result<(), Error> {
                // SAFETY: the caller keeps `f(data)` callable.
                unsafe { $m::$launch_host_func(stream.0.cast(), Some(f), data) }
            }

            unsafe fn add_recording_callback(
                stream: RawStream,
                data: *mut c_void,
            ) -> Result<(), Error> {
                // SAFETY: the caller keeps `data` alive until the callback ran.
                unsafe { $m::$stream_add_callback(stream.0.cast(), Some($callback), data, 0) }
            }

            #[inline(always)]
            fn graph_create() -> Result<RawGraph, Error> {
                let mut g = ptr::null_mut();
                // SAFETY: `g` is valid for writes.
                unsafe { $m::$graph_create(&mut g, 0) }?;
                Ok(RawGraph(g.cast()))
            }

            #[inline(always)]
            unsafe fn graph_destroy(graph: RawGraph) -> Result<(), Error> {
                // SAFETY: the caller's handle.
                unsafe { $m::$graph_destroy(graph.0.cast()) }
            }

            #[inline(always)]
            unsafe fn instantiate(graph: RawGraph) -> Result<RawExec, Error> {
                let mut e = ptr::null_mut();
                // SAFETY: the caller's handle; `e` is valid for writes.
                unsafe { $m::$graph_instantiate(&mut e, graph.0.cast(), 0) }?;
                Ok(RawExec(e.cast()))
            }

            #[inline(always)]
            unsafe fn exec_destroy(exec: RawExec) -> Result<(), Error> {
                // SAFETY: the caller's handle.
                unsafe { $m::$graph_exec_destroy(exec.0.cast()) }
            }

            #[inline(always)]
            unsafe fn graph_launch(exec: RawExec, stream: RawStream) -> Result<(), Error> {
                // SAFETY: the caller's handles.
                unsafe { $m::$graph_launch(exec.0.cast(), stream.0.cast()) }
            }

            #[inline(always)]
            unsafe fn add_host_node_after(
                graph: RawGraph,
                deps: &[RawNode],
                f: HostFn,
                data: *mut c_void,
            ) -> Result<RawNode, Error> {
                let params = $m::$HostNodeParams {
                    fn_: Some(f),
                    userData: data,
                };
                // `RawNode` is a transparent graph node handle; none is passed as null.
                let dep_ptr: *const $m::$GraphNode = if deps.is_empty() {
                    ptr::null()
                } else {
                    deps.as_ptr().cast()
                };
                let (g, n_deps) = (graph.0.cast(), deps.len());
                let mut n = ptr::null_mut();
                // SAFETY: the caller's handles; `params` and `deps` outlive the call.
                unsafe { $m::$graph_add_host_node(&mut n, g, dep_ptr, n_deps, &params) }?;
                Ok(RawNode(n.cast()))
            }

            unsafe fn host_node_params(
                node: RawNode,
            ) -> Result<(Option<HostFn>, *mut c_void), Error> {
                let mut params = $m::$HostNodeParams {
                    fn_: None,
                    userData: ptr::null_mut(),
                };
                // SAFETY: the caller's handle; `params` is valid for writes.
                unsafe { $m::$graph_host_node_get_params(node.0.cast(), &mut params) }?;
                Ok((params.fn_, params.userData))
            }

            unsafe fn set_host_node_params(
                node: RawNode,
                f: HostFn,
                data: *mut c_void,
            ) -> Result<(), Error> {
                let params = $m::$HostNodeParams {
                    fn_: Some(f),
                    userData: data,
                };
                // SAFETY: the caller's handle; `params` outlives the call.
                unsafe { $m::$graph_host_node_set_params(node.0.cast(), &params) }
            }

            unsafe fn exec_set_host_node_params(
                exec: RawExec,
                node: RawNode,
                f: HostFn,
                data: *mut c_void,
            ) -> Result<(), Error> {
                let params = $m::$HostNodeParams {
                    fn_: Some(f),
                    userData: data,
                };
                let (e, n) = (exec.0.cast(), node.0.cast());
                // SAFETY: the caller's handles; `params` outlives the call.
                unsafe { $m::$graph_exec_host_node_set_params(e, n, &params) }
            }

            unsafe fn user_object_create(
                ptr: *mut c_void,
                destroy: HostFn,
            ) -> Result<RawUserObject, Error> {
                let flags = $no_destructor_sync;
                let mut o = ptr::null_mut();
                // SAFETY: the caller keeps `destroy(ptr)` callable.
                unsafe { $m::$user_object_create(&mut o, ptr, Some(destroy), 1, flags) }?;
                Ok(RawUserObject(o.cast()))
            }

            unsafe fn graph_move_user_object(
                graph: RawGraph,
                object: RawUserObject,
            ) -> Result<(), Error> {
                let (g, o, flags) = (graph.0.cast(), object.0.cast(), $user_object_move);
                // SAFETY: the caller's handles and reference.
                unsafe { $m::$graph_retain_user_object(g, o, 1, flags) }
            }

            unsafe fn user_object_release(object: RawUserObject) -> Result<(), Error> {
                // SAFETY: the caller's reference.
                unsafe { $m::$user_object_release(object.0.cast(), 1) }
            }

            fn host_alloc(bytes: usize) -> Result<*mut c_void, Error> {
                let mut p = ptr::null_mut();
                // SAFETY: `p` is valid for writes.
                unsafe { $m::$host_alloc(&mut p, bytes) }?;
                Ok(p)
            }

            unsafe fn host_free(ptr: *mut c_void) -> Result<(), Error> {
                // SAFETY: the caller's allocation.
                unsafe { $m::$host_free(ptr) }
            }

            fn event_create() -> Result<RawEvent, Error> {
                let mut e = ptr::null_mut();
                // SAFETY: `e` is valid for writes.
                unsafe { $m::$event_create(&mut e, $event_disable_timing) }?;
                Ok(RawEvent(e.cast()))
            }

            unsafe fn event_destroy(event: RawEvent) -> Result<(), Error> {
                // SAFETY: the caller's handle.
                unsafe { $m::$event_destroy(event.0.cast()) }
            }

            unsafe fn event_record(event: RawEvent, stream: RawStream) -> Result<(), Error> {
                // SAFETY: the caller's handles.
                unsafe { $m::$event_record(event.0.cast(), stream.0.cast()) }
            }

            unsafe fn event_is_complete(event: RawEvent) -> Result<bool, Error> {
                // SAFETY: the caller's handle.
                completion(unsafe { $m::$event_query(event.0.cast()) })
            }

            $($own)*
        }
    };
}

/// The driver API of the target module `$target`.
macro_rules! driver_binding {
    ($target:ident) => {
        binding! {
            $target::driver as cu, Driver, Api::Driver, driver_callback;
            types {
                stream: CUstream,
                status: CUresult,
                graph_node: CUgraphNode,
                host_node_params: CUDA_HOST_NODE_PARAMS,
            }
            flags {
                stream_non_blocking: cu::CUstream_flags::CU_STREAM_NON_BLOCKING.0,
                capture_thread_local: cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                user_object_no_destructor_sync:
                    cu::CUuserObject_flags::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC.0,
                graph_user_object_move: cu::CUuserObjectRetain_flags::CU_GRAPH_USER_OBJECT_MOVE.0,
                event_disable_timing: cu::CUevent_flags::CU_EVENT_DISABLE_TIMING.0,
            }
            calls {
                driver_get_version: cuDriverGetVersion,
                stream_create: cuStreamCreate,
                stream_destroy: cuStreamDestroy,
                stream_synchronize: cuStreamSynchronize,
                stream_begin_capture: cuStreamBeginCapture,
                stream_end_capture: cuStreamEndCapture,
                launch_host_func: cuLaunchHostFunc,
                stream_add_callback: cuStreamAddCallback,
                graph_create: cuGraphCreate,
                graph_destroy: cuGraphDestroy,
                graph_instantiate: cuGraphInstantiate,
                graph_exec_destroy: cuGraphExecDestroy,
                graph_launch: cuGraphLaunch,
                graph_add_host_node: cuGraphAddHostNode,
                graph_host_node_get_params: cuGraphHostNodeGetParams,
                graph_host_node_set_params: cuGraphHostNodeSetParams,
                graph_exec_host_node_set_params: cuGraphExecHostNodeSetParams,
                user_object_create: cuUserObjectCreate,
                graph_retain_user_object: cuGraphRetainUserObject,
                user_object_release: cuUserObjectRelease,
                host_alloc: cuMemAllocHost,
                host_free: cuMemFreeHost,
                event_create: cuEventCreate,
                event_destroy: cuEventDestroy,
                event_record: cuEventRecord,
                event_query: cuEventQuery,
            }
            own {
                fn runtime_version() -> Option<Result<u32, Error>> {
                    None
                }

                fn device_count() -> Result<usize, Error> {
                    let mut n = 0;
                    // SAFETY: plain calls; `n` is valid for writes.
                    unsafe {
                        cu::cuInit(0)?;
                        cu::cuDeviceGetCount(&mut n)?;
                    }
                    Ok(unsigned(n) as usize)
                }

                fn enter(device: usize) -> Result<RawContext, Error> {
                    let mut dev = 0;
                    let mut ctx = ptr::null_mut();
                    // SAFETY: out-pointers are valid for writes; the context is released again
                    // if it cannot be made current.
                    unsafe {
                        cu::cuInit(0)?;
                        cu::cuDeviceGet(&mut dev, ordinal(device))?;
                        cu::cuDevicePrimaryCtxRetain(&mut ctx, dev)?;
                        if let Err(e) = cu::cuCtxSetCurrent(ctx) {
                            let _ = cu::cuDevicePrimaryCtxRelease(dev);
                            return Err(e);
                        }
                    }
                    Ok(RawContext(ctx.cast()))
                }

                unsafe fn make_current(ctx: RawContext, _device: usize) -> Result<(), Error> {
                    // SAFETY: the caller passes a retained primary context.
                    unsafe { cu::cuCtxSetCurrent(ctx.0.cast()) }
                }

                unsafe fn leave(_ctx: RawContext, device: usize) -> Result<(), Error> {
                    let mut dev = 0;
                    // SAFETY: the caller retained this device's primary context in `enter`.
                    unsafe {
                        cu::cuDeviceGet(&mut dev, ordinal(device))?;
                        let unset = cu::cuCtxSetCurrent(ptr::null_mut());
                        let released = cu::cuDevicePrimaryCtxRelease(dev);
                        unset.and(released)
                    }
                }

                fn mem_alloc(bytes: usize) -> Result<DevicePtr, Error> {
                    let mut d = 0;
                    // SAFETY: `d` is valid for writes.
                    unsafe { cu::cuMemAlloc(&mut d, bytes) }?;
                    Ok(DevicePtr(d))
                }

                unsafe fn mem_free(ptr: DevicePtr) -> Result<(), Error> {
                    // SAFETY: the caller's allocation.
                    unsafe { cu::cuMemFree(ptr.0) }
                }

                unsafe fn memset_d8_async(
                    dst: DevicePtr,
                    value: u8,
                    bytes: usize,
                    stream: RawStream,
                ) -> Result<(), Error> {
                    // SAFETY: the caller's memory and stream.
                    unsafe { cu::cuMemsetD8Async(dst.0, value, bytes, stream.0.cast()) }
                }

                unsafe fn copy_to_host_async(
                    dst: *mut c_void,
                    src: DevicePtr,
                    bytes: usize,
                    stream: RawStream,
                ) -> Result<(), Error> {
                    // SAFETY: the caller's memory and stream.
                    unsafe { cu::cuMemcpyDtoHAsync(dst, src.0, bytes, stream.0.cast()) }
                }

                unsafe fn copy_to_device_async(
                    dst: DevicePtr,
                    src: *const c_void,
                    bytes: usize,
                    stream: RawStream,
                ) -> Result<(), Error> {
                    // SAFETY: the caller's memory and stream.
                    unsafe { cu::cuMemcpyHtoDAsync(dst.0, src, bytes, stream.0.cast()) }
                }

                fn kernels() -> Result<Kernels, String> {
                    driver_kernels!()
                }
            }
        }
    };
}

/// The runtime API of the target module `$target`, whose runtime has major version `$major`
/// and the target the capabilities `[$capability ...]`.
macro_rules! runtime_binding {
    ($target:ident, $major:literal, [$($capability:ident)*]) => {
        binding! {
            $target::runtime as rt, Runtime, Api::Runtime { major: $major }, runtime_callback;
            types {
                stream: cudaStream_t,
                status: cudaError_t,
                graph_node: cudaGraphNode_t,
                host_node_params: cudaHostNodeParams,
            }
            flags {
                stream_non_blocking: rt::cudaStreamNonBlocking,
                capture_thread_local: rt::cudaStreamCaptureMode::cudaStreamCaptureModeThreadLocal,
                user_object_no_destructor_sync:
                    rt::cudaUserObjectFlags::cudaUserObjectNoDestructorSync.0,
                graph_user_object_move: rt::cudaUserObjectRetainFlags::cudaGraphUserObjectMove.0,
                event_disable_timing: rt::cudaEventDisableTiming,
            }
            calls {
                driver_get_version: cudaDriverGetVersion,
                stream_create: cudaStreamCreateWithFlags,
                stream_destroy: cudaStreamDestroy,
                stream_synchronize: cudaStreamSynchronize,
                stream_begin_capture: cudaStreamBeginCapture,
                stream_end_capture: cudaStreamEndCapture,
                launch_host_func: cudaLaunchHostFunc,
                stream_add_callback: cudaStreamAddCallback,
                graph_create: cudaGraphCreate,
                graph_destroy: cudaGraphDestroy,
                graph_instantiate: cudaGraphInstantiate,
                graph_exec_destroy: cudaGraphExecDestroy,
                graph_launch: cudaGraphLaunch,
                graph_add_host_node: cudaGraphAddHostNode,
                graph_host_node_get_params: cudaGraphHostNodeGetParams,
                graph_host_node_set_params: cudaGraphHostNodeSetParams,
                graph_exec_host_node_set_params: cudaGraphExecHostNodeSetParams,
                user_object_create: cudaUserObjectCreate,
                graph_retain_user_object: cudaGraphRetainUserObject,
                user_object_release: cudaUserObjectRelease,
                host_alloc: cudaMallocHost,
                host_free: cudaFreeHost,
                event_create: cudaEventCreateWithFlags,
                event_destroy: cudaEventDestroy,
                event_record: cudaEventRecord,
                event_query: cudaEventQuery,
            }
            own {
                fn runtime_version() -> Option<Result<u32, Error>> {
                    let mut v = 0;
                    // SAFETY: `v` is valid for writes.
                    Some(unsafe { rt::cudaRuntimeGetVersion(&mut v) }.map(|()| unsigned(v)))
                }

                fn device_count() -> Result<usize, Error> {
                    let mut n = 0;
                    // SAFETY: `n` is valid for writes.
                    unsafe { rt::cudaGetDeviceCount(&mut n) }?;
                    Ok(unsigned(n) as usize)
                }

                fn enter(device: usize) -> Result<RawContext, Error> {
                    // SAFETY: a plain call.
                    unsafe { rt::cudaSetDevice(ordinal(device)) }?;
                    Ok(RawContext(ptr::null_mut()))
                }

                unsafe fn make_current(_ctx: RawContext, device: usize) -> Result<(), Error> {
                    // SAFETY: a plain call.
                    unsafe { rt::cudaSetDevice(ordinal(device)) }
                }

                unsafe fn leave(_ctx: RawContext, _device: usize) -> Result<(), Error> {
                    Ok(())
                }

                fn mem_alloc(bytes: usize) -> Result<DevicePtr, Error> {
                    let mut p = ptr::null_mut();
                    // SAFETY: `p` is valid for writes.
                    unsafe { rt::cudaMalloc(&mut p, bytes) }?;
                    Ok(DevicePtr(p.addr() as u64))
                }

                unsafe fn mem_free(ptr: DevicePtr) -> Result<(), Error> {
                    // SAFETY: the caller's allocation.
                    unsafe { rt::cudaFree(device(ptr)) }
                }

                unsafe fn memset_d8_async(
                    dst: DevicePtr,
                    value: u8,
                    bytes: usize,
                    stream: RawStream,
                ) -> Result<(), Error> {
                    let value = c_int::from(value);
                    // SAFETY: the caller's memory and stream.
                    unsafe { rt::cudaMemsetAsync(device(dst), value, bytes, stream.0.cast()) }
                }

                unsafe fn copy_to_host_async(
                    dst: *mut c_void,
                    src: DevicePtr,
                    bytes: usize,
                    stream: RawStream,
                ) -> Result<(), Error> {
                    let kind = rt::cudaMemcpyKind::cudaMemcpyDeviceToHost;
                    // SAFETY: the caller's memory and stream.
                    unsafe { rt::cudaMemcpyAsync(dst, device(src), bytes, kind, stream.0.cast()) }
                }

                unsafe fn copy_to_device_async(
                    dst: DevicePtr,
                    src: *const c_void,
                    bytes: usize,
                    stream: RawStream,
                ) -> Result<(), Error> {
                    let kind = rt::cudaMemcpyKind::cudaMemcpyHostToDevice;
                    // SAFETY: the caller's memory and stream.
                    unsafe { rt::cudaMemcpyAsync(device(dst), src, bytes, kind, stream.0.cast()) }
                }

                fn kernels() -> Result<Kernels, String> {
                    runtime_kernels!($target, [$($capability)*])
                }
            }
        }
    };
}

/// The driver's kernel loading and launches (`cuModuleLoadData`, `cuModuleGetFunction`,
/// `cuLaunchKernel`, `cuGraphAddKernelNode`), which every target has.
macro_rules! driver_kernels {
    () => {{
        unsafe fn load(image: &CStr) -> Result<RawModule, Error> {
            let mut m = ptr::null_mut();
            // SAFETY: a NUL-terminated image; `m` is valid for writes.
            unsafe { cu::cuModuleLoadData(&mut m, image.as_ptr().cast()) }?;
            Ok(RawModule(m.cast()))
        }
        unsafe fn kernel(module: RawModule, name: &CStr) -> Result<RawKernel, Error> {
            let mut f = ptr::null_mut();
            // SAFETY: the caller's module; `f` is valid for writes.
            unsafe { cu::cuModuleGetFunction(&mut f, module.0.cast(), name.as_ptr()) }?;
            Ok(RawKernel(f.cast()))
        }
        unsafe fn unload(module: RawModule) -> Result<(), Error> {
            // SAFETY: the caller's module.
            unsafe { cu::cuModuleUnload(module.0.cast()) }
        }
        unsafe fn launch(
            kernel: RawKernel,
            shape: Shape,
            params: *mut *mut c_void,
            stream: RawStream,
        ) -> Result<(), Error> {
            let ([gx, gy, gz], [bx, by, bz]) = (shape.grid, shape.block);
            // SAFETY: the caller's handles and parameters.
            unsafe {
                cu::cuLaunchKernel(
                    kernel.0.cast(),
                    gx,
                    gy,
                    gz,
                    bx,
                    by,
                    bz,
                    0,
                    stream.0.cast(),
                    params,
                    ptr::null_mut(),
                )
            }
        }
        unsafe fn add_node(
            graph: RawGraph,
            deps: &[RawNode],
            kernel: RawKernel,
            shape: Shape,
            params: *mut *mut c_void,
        ) -> Result<RawNode, Error> {
            let node_params = cu::CUDA_KERNEL_NODE_PARAMS {
                func: kernel.0.cast(),
                gridDimX: shape.grid[0],
                gridDimY: shape.grid[1],
                gridDimZ: shape.grid[2],
                blockDimX: shape.block[0],
                blockDimY: shape.block[1],
                blockDimZ: shape.block[2],
                kernelParams: params,
                ..Default::default()
            };
            let dep_ptr: *const cu::CUgraphNode = if deps.is_empty() {
                ptr::null()
            } else {
                deps.as_ptr().cast()
            };
            let mut n = ptr::null_mut();
            // SAFETY: the caller's handles; the parameters are copied into the node.
            unsafe {
                cu::cuGraphAddKernelNode(&mut n, graph.0.cast(), dep_ptr, deps.len(), &node_params)
            }?;
            Ok(RawNode(n.cast()))
        }
        Ok(Kernels {
            load,
            kernel,
            unload,
            launch,
            add_node,
        })
    }};
}

/// The runtime's kernel loading and launches (`cudaLibraryLoadData`, `cudaLibraryGetKernel`,
/// `cudaLaunchKernel`, `cudaGraphAddKernelNode`; both launches take a `cudaKernel_t` as their
/// function), where the target has the `runtime_library` capability; else why not.
macro_rules! runtime_kernels {
    ($target:ident, []) => {
        Err(format!(
            "the {} runtime declares no cudaLibraryLoadData, cudaLibraryGetKernel and \
             cudaLibraryUnload, so it cannot load PTX (its driver API can)",
            stringify!($target)
        ))
    };
    ($target:ident, [runtime_library $($rest:ident)*]) => {{
        unsafe fn load(image: &CStr) -> Result<RawModule, Error> {
            let mut l = ptr::null_mut();
            let (code, none) = (image.as_ptr().cast(), ptr::null_mut());
            // SAFETY: a NUL-terminated image, no options; `l` is valid for writes.
            unsafe {
                rt::cudaLibraryLoadData(&mut l, code, ptr::null_mut(), none, 0, ptr::null_mut(), none, 0)
            }?;
            Ok(RawModule(l.cast()))
        }
        unsafe fn kernel(module: RawModule, name: &CStr) -> Result<RawKernel, Error> {
            let mut k = ptr::null_mut();
            // SAFETY: the caller's library; `k` is valid for writes.
            unsafe { rt::cudaLibraryGetKernel(&mut k, module.0.cast(), name.as_ptr()) }?;
            Ok(RawKernel(k.cast()))
        }
        unsafe fn unload(module: RawModule) -> Result<(), Error> {
            // SAFETY: the caller's library.
            unsafe { rt::cudaLibraryUnload(module.0.cast()) }
        }
        fn dim([x, y, z]: [u32; 3]) -> rt::dim3 {
            rt::dim3 { x, y, z }
        }
        unsafe fn launch(
            kernel: RawKernel,
            shape: Shape,
            params: *mut *mut c_void,
            stream: RawStream,
        ) -> Result<(), Error> {
            let (grid, block) = (dim(shape.grid), dim(shape.block));
            // SAFETY: the caller's handles and parameters; a `cudaKernel_t` stands for the
            // function, as the header allows.
            unsafe {
                rt::cudaLaunchKernel(kernel.0.cast_const(), grid, block, params, 0, stream.0.cast())
            }
        }
        unsafe fn add_node(
            graph: RawGraph,
            deps: &[RawNode],
            kernel: RawKernel,
            shape: Shape,
            params: *mut *mut c_void,
        ) -> Result<RawNode, Error> {
            let node_params = rt::cudaKernelNodeParams {
                func: kernel.0,
                gridDim: dim(shape.grid),
                blockDim: dim(shape.block),
                kernelParams: params,
                ..Default::default()
            };
            let dep_ptr: *const rt::cudaGraphNode_t = if deps.is_empty() {
                ptr::null()
            } else {
                deps.as_ptr().cast()
            };
            let mut n = ptr::null_mut();
            // SAFETY: the caller's handles; the parameters are copied into the node.
            unsafe {
                rt::cudaGraphAddKernelNode(&mut n, graph.0.cast(), dep_ptr, deps.len(), &node_params)
            }?;
            Ok(RawNode(n.cast()))
        }
        Ok(Kernels {
            load,
            kernel,
            unload,
            launch,
            add_node,
        })
    }};
    ($target:ident, [$other:ident $($rest:ident)*]) => {
        runtime_kernels!($target, [$($rest)*])
    };
}

/// `HostFuncV2` for one API of a target that declares the `..._v2` launch: the function and
/// the sync modes the API names.
macro_rules! host_func_v2 {
    ($binding:ident, $m:ident :: $function:ident, $modes:ident { $($mode:ident),* $(,)? }) => {
        impl HostFuncV2 for $binding {
            const FUNCTION: &'static str = stringify!($function);
            const SYNC_MODES: &'static [(&'static str, u32)] =
                &[$((stringify!($mode), $m::$modes::$mode.0)),*];

            unsafe fn launch_host_func_v2(
                stream: RawStream,
                f: HostFn,
                data: *mut c_void,
                sync_mode: u32,
            ) -> Result<(), Error> {
                // SAFETY: the caller keeps `f(data)` callable.
                unsafe { $m::$function(stream.0.cast(), Some(f), data, sync_mode) }
            }
        }
    };
}

/// What every target module's bindings refer to.
mod prelude {
    pub(super) use std::ffi::{CStr, c_int, c_void};
    pub(super) use std::ptr;

    pub(super) use cuda_hostcb::Error;

    pub(super) use super::{completion, device, ordinal, record_callback, unsigned};
    pub(super) use crate::binding::{
        Api, Binding, DevicePtr, HostFn, HostFuncV2, Kernels, RawContext, RawEvent, RawExec,
        RawGraph, RawKernel, RawModule, RawNode, RawStream, RawUserObject, Shape,
    };
}

/// One module per target of the generated crate (`cuda_hostcb::for_each_target!`), with its
/// driver and runtime bindings and what its capabilities add.
macro_rules! target_bindings {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        #[doc = concat!("The CTK ", $version, " target: `cuda_hostcb::", stringify!($target), "`, with the CUDA ", stringify!($major), " runtime.")]
        pub mod $target {
            use super::prelude::*;
            driver_binding!($target);
            runtime_binding!($target, $major, [$($capability)*]);
            $(capability!($capability);)*
        }
    };
}

/// What a capability of a target adds to its bindings.
macro_rules! capability {
    // The 13.1 `..._v2` host-function launch.
    (host_func_v2) => {
        host_func_v2!(
            Driver,
            cu::cuLaunchHostFunc_v2,
            CUhostTaskSyncMode {
                CU_HOST_TASK_BLOCKING,
                CU_HOST_TASK_SPINWAIT
            }
        );
        host_func_v2!(
            Runtime,
            rt::cudaLaunchHostFunc_v2,
            cudaHostTaskSyncMode {
                cudaHostTaskBlocking,
                cudaHostTaskSpinWait
            }
        );
    };
    // The tests use the capture API every target declares; `runtime_library` is read by
    // `runtime_kernels!`.
    ($other:ident) => {};
}

cuda_hostcb::for_each_target!(target_bindings);
