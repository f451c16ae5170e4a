//! Graphs whose host nodes own their closures through CUDA user objects, and their executables.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;

use crate::callback::{self, HostFn};
use crate::context::push;
use crate::reaper::{self, Handle};
use crate::shared::{Shared, discard, drop_shared};
use crate::sys;
use crate::{Context, Stream};
use crate::{Error, arena};

/// Gives `data` to a new CUDA user object (destructor `destroy`, flag
/// `CU_USER_OBJECT_NO_DESTRUCTOR_SYNC`) and moves that object's one reference into `graph`
/// (`CU_GRAPH_USER_OBJECT_MOVE`); returns the object. The one place a value of this crate is
/// handed to a graph: host nodes' closures, a capture's arena, an updatable executable's store,
/// and any value kept by [`Graph::keep`].
///
/// From then on CUDA decides when the value goes: clones and executables of the graph copy the
/// reference, launches hold it until they finish, and the destructor runs once, after the last
/// of them. If the object cannot be made, `discard(data)` disposes of the value here; if the
/// reference cannot be moved, releasing it runs the destructor.
///
/// # Safety
/// `destroy(data)` (on CUDA's thread, or here) and `discard(data)` (here) each dispose of what
/// `data` owns, and exactly one of them runs, once; the caller gives `data` up.
pub(super) unsafe fn give_to_graph(
    graph: sys::CUgraph,
    data: *mut c_void,
    destroy: HostFn,
    discard: unsafe fn(*mut c_void),
) -> Result<sys::CUuserObject, Error> {
    let mut object: sys::CUuserObject = ptr::null_mut();
    // SAFETY: `destroy` disposes of `data` once, when the count reaches 0 (the caller's
    // contract).
    let made = unsafe {
        sys::cuUserObjectCreate(
            &mut object,
            data,
            Some(destroy),
            1,
            sys::CUuserObject_flags::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC.0,
        )
    };
    if let Err(e) = made {
        // SAFETY: no user object owns `data`: it is disposed of here, once.
        unsafe { discard(data) };
        return Err(e.into());
    }
    // SAFETY: `object` is live and this thread owns its one reference, which MOVE transfers.
    let moved = unsafe {
        sys::cuGraphRetainUserObject(
            graph,
            object,
            1,
            sys::CUuserObjectRetain_flags::CU_GRAPH_USER_OBJECT_MOVE.0,
        )
    };
    if let Err(e) = moved {
        // The reference is still ours: releasing it lets the destructor dispose of `data`.
        // SAFETY: we own one reference.
        let _ = unsafe { sys::cuUserObjectRelease(object, 1) };
        return Err(e.into());
    }
    Ok(object)
}

/// Hands a closure to a user object moved into `graph` ([`give_to_graph`]); returns the host
/// function and user data for the node.
#[inline]
pub(super) fn attach(graph: sys::CUgraph, shared: Shared) -> Result<(HostFn, *mut c_void), Error> {
    let (call, destroy, discard, data) = shared.into_parts();
    // SAFETY: `destroy` (the reaper's drop) and `discard` (a drop here) each drop the box behind
    // `data` once; `shared` gave it up.
    unsafe { give_to_graph(graph, data, destroy, discard)? };
    Ok((call, data))
}

/// Makes a user object moved into `graph` own `arena` ([`give_to_graph`]). On failure the arena
/// has been disposed of: dropped here, or by the destructor when the reference is released.
#[cold]
#[inline(never)]
pub(super) fn own_arena(graph: sys::CUgraph, arena: *mut c_void) -> Result<(), Error> {
    // SAFETY: `drop_arena` (through the reaper) and `drop_arena_now` (here; the arena is still
    // empty) each drop the arena once.
    unsafe { give_to_graph(graph, arena, arena::drop_arena, arena::drop_arena_now) }.map(|_| ())
}

/// Moves `value` into a user object held by `graph` ([`give_to_graph`]): dropped by the reaper
/// thread after the last holder is gone, or here if the object cannot be made.
pub(super) fn keep_in<T: Send + 'static>(graph: sys::CUgraph, value: T) -> Result<(), Error> {
    let data = Box::into_raw(Box::new(value)).cast::<c_void>();
    // SAFETY: `drop_shared::<T>` hands the box to the reaper, `discard::<T>` drops it here; each
    // drops it once, and nothing else uses it.
    unsafe { give_to_graph(graph, data, drop_shared::<T>, discard::<T>) }.map(|_| ())
}

/// A CUDA graph (`CUgraph`), destroyed on drop; its host nodes own their closures.
///
/// `Send` but not `Sync`: CUDA graphs are not internally synchronised.
#[derive(Debug)]
pub struct Graph {
    raw: sys::CUgraph,
    ctx: Option<Context>,
}

// SAFETY: a graph may be used from any thread, one at a time (`Graph` is not `Sync`).
unsafe impl Send for Graph {}

/// A node of a [`Graph`], to name as a dependency of later nodes of the same graph.
#[derive(Debug, Clone, Copy)]
pub struct GraphNode<'g> {
    raw: sys::CUgraphNode,
    graph: sys::CUgraph,
    _graph: PhantomData<&'g Graph>,
}

impl GraphNode<'_> {
    /// The raw node; valid while its graph lives.
    pub fn as_raw(&self) -> sys::CUgraphNode {
        self.raw
    }

    /// The raw graph the node belongs to.
    pub(super) fn graph_raw(&self) -> sys::CUgraph {
        self.graph
    }
}

impl<'g> GraphNode<'g> {
    /// A node that the safe layer's other modules added to `graph`.
    pub(super) fn of(raw: sys::CUgraphNode, graph: &'g Graph) -> GraphNode<'g> {
        GraphNode {
            raw,
            graph: graph.raw,
            _graph: PhantomData,
        }
    }
}

impl Graph {
    /// Creates an empty graph; `ctx` is kept alive with it and made current to instantiate it.
    pub fn new(ctx: &Context) -> Result<Graph, Error> {
        callback::enter("Graph::new")?;
        let _current = ctx.push()?;
        let mut raw: sys::CUgraph = ptr::null_mut();
        // SAFETY: a valid out-pointer; flags must be 0.
        unsafe { sys::cuGraphCreate(&mut raw, 0)? };
        Ok(Graph {
            raw,
            ctx: Some(ctx.clone()),
        })
    }

    /// The raw graph and the context, without destroying the graph (for a borrowed one).
    pub(super) fn into_parts(self) -> (sys::CUgraph, Option<Context>) {
        let graph = std::mem::ManuallyDrop::new(self);
        // SAFETY: `graph` is never dropped, so its context is moved out exactly once.
        (graph.raw, unsafe { ptr::read(&graph.ctx) })
    }

    /// Takes ownership of a graph made by CUDA.
    ///
    /// # Safety
    /// `raw` is a valid graph that nothing else destroys.
    pub(super) unsafe fn from_raw(raw: sys::CUgraph, ctx: Option<Context>) -> Graph {
        Graph { raw, ctx }
    }

    /// Adds a host node that calls `f` on every launch, after `dependencies`.
    ///
    /// `f` is owned by a CUDA user object that this graph holds; clones, executables and
    /// in-flight launches hold it too, and it is dropped once, after the last of them is gone
    /// (asynchronously, by the reaper thread: see [`wait_for_drops`](crate::wait_for_drops)).
    /// Once the context has hit an error CUDA calls it no more; it is still dropped when the
    /// graph and its executables go, so wait for a closure's drop (a value it owns), not for
    /// its call.
    pub fn add_host_node<F>(
        &self,
        dependencies: &[GraphNode<'_>],
        f: F,
    ) -> Result<GraphNode<'_>, Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        callback::enter("Graph::add_host_node")?;
        let deps = self.raw_dependencies(dependencies)?;
        let (call, data) = attach(self.raw, Shared::new(f))?;
        // SAFETY: the graph owns the closure through the user object `attach` moved into it.
        // If adding the node fails, the graph still owns it and drops it with itself.
        unsafe { self.add_host(&deps, call, data) }
    }

    /// Adds a host node that calls `f(user_data)` unchanged, the raw path.
    ///
    /// # Safety
    /// `f` must not unwind, nor call CUDA; `user_data` must stay valid until this graph, its
    /// clones, every executable made from them and every launch of those are gone.
    pub unsafe fn add_host_node_raw(
        &self,
        dependencies: &[GraphNode<'_>],
        f: unsafe extern "C" fn(*mut c_void),
        user_data: *mut c_void,
    ) -> Result<GraphNode<'_>, Error> {
        callback::enter("Graph::add_host_node_raw")?;
        let deps = self.raw_dependencies(dependencies)?;
        // SAFETY: the caller's contract covers `f` and `user_data`.
        unsafe { self.add_host(&deps, f, user_data) }
    }

    /// Keeps `value` alive for as long as this graph, its clones, every executable made from
    /// them and every launch of those can use it: a buffer a kernel node reads, a pinned host
    /// array a copy node writes, anything its nodes point into. The program may drop its own
    /// handles of the graph at once; `value` is dropped once, after the last of them, on the
    /// reaper thread (never on one of CUDA's), as a host node's closure is.
    ///
    /// ```no_run
    /// # fn run(ctx: &cuda_hostcb_safe::Context) -> Result<(), cuda_hostcb_safe::Error> {
    /// let graph = cuda_hostcb_safe::Graph::new(ctx)?;
    /// let input: Vec<u8> = vec![0; 4096]; // ... something the graph's nodes read ...
    /// graph.keep(input)?;
    /// let exec = graph.instantiate()?;
    /// drop(graph); // the executable keeps the value
    /// # Ok(()) }
    /// ```
    pub fn keep<T: Send + 'static>(&self, value: T) -> Result<(), Error> {
        callback::enter("Graph::keep")?;
        keep_in(self.raw, value)
    }

    /// Copies the graph (`cuGraphClone`); the copy holds its own references to the closures.
    pub fn try_clone(&self) -> Result<Graph, Error> {
        callback::enter("Graph::try_clone")?;
        let mut raw: sys::CUgraph = ptr::null_mut();
        // SAFETY: the graph is valid; a valid out-pointer.
        unsafe { sys::cuGraphClone(&mut raw, self.raw)? };
        Ok(Graph {
            raw,
            ctx: self.ctx.clone(),
        })
    }

    /// Instantiates the graph (`cuGraphInstantiate`) in its context; the executable holds its
    /// own references to the closures, so the graph may be dropped before it.
    pub fn instantiate(&self) -> Result<GraphExec, Error> {
        self.instantiate_with(Instantiate::new())
    }

    /// Instantiates the graph as [`instantiate`](Self::instantiate) does, with CUDA's
    /// instantiation flags (`cuGraphInstantiateWithParams`): memory a launch allocates freed
    /// before the next ([`Instantiate::auto_free_on_launch`]), node priorities
    /// ([`Instantiate::use_node_priority`]), an upload to the device on a stream
    /// ([`Instantiate::upload`]). The closures are owned as by `instantiate`.
    ///
    /// ```no_run
    /// # fn run(graph: &cuda_hostcb_safe::Graph, stream: &cuda_hostcb_safe::Stream) -> Result<(), cuda_hostcb_safe::Error> {
    /// use cuda_hostcb_safe::Instantiate;
    /// let exec = graph.instantiate_with(Instantiate::new().auto_free_on_launch().upload(stream))?;
    /// exec.launch(stream)?;
    /// exec.launch(stream)?; // the first launch's unfreed allocations are freed first
    /// # Ok(()) }
    /// ```
    pub fn instantiate_with(&self, how: Instantiate<'_>) -> Result<GraphExec, Error> {
        callback::enter("Graph::instantiate")?;
        let _current = push(self.ctx.as_ref())?;
        // GraphExec::launch calls cuGraphLaunch's entry point as resolved: no executable
        // without it. (A driver with graphs has it.)
        sys::entry::cuGraphLaunch.get()?;
        let mut raw: sys::CUgraphExec = ptr::null_mut();
        if how.flags == 0 {
            // SAFETY: the graph is valid; a valid out-pointer.
            unsafe { sys::cuGraphInstantiate(&mut raw, self.raw, 0)? };
        } else {
            let mut params = sys::CUDA_GRAPH_INSTANTIATE_PARAMS {
                flags: how.flags,
                hUploadStream: how.upload.map_or(ptr::null_mut(), Stream::as_raw),
                hErrNode_out: ptr::null_mut(),
                result_out: sys::CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_SUCCESS,
            };
            // SAFETY: the graph and the upload stream (borrowed for the call) are valid; valid
            // out-pointers.
            unsafe { sys::cuGraphInstantiateWithParams(&mut raw, self.raw, &mut params)? };
        }
        Ok(GraphExec {
            raw,
            ctx: self.ctx.clone(),
        })
    }

    /// How many nodes the graph has.
    pub fn node_count(&self) -> Result<usize, Error> {
        callback::enter("Graph::node_count")?;
        let mut count = 0usize;
        // SAFETY: a null node array asks for the count only.
        unsafe { sys::cuGraphGetNodes(self.raw, ptr::null_mut(), &mut count)? };
        Ok(count)
    }

    /// The raw graph; valid while `self` lives.
    pub fn as_raw(&self) -> sys::CUgraph {
        self.raw
    }

    /// The context the graph instantiates in (`None` for one captured on a borrowed stream).
    pub fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }

    pub(super) fn raw_dependencies(
        &self,
        nodes: &[GraphNode<'_>],
    ) -> Result<Vec<sys::CUgraphNode>, Error> {
        nodes
            .iter()
            .map(|n| {
                if n.graph == self.raw {
                    Ok(n.raw)
                } else {
                    Err(Error::ForeignNode)
                }
            })
            .collect()
    }

    /// # Safety
    /// `call(data)` is sound on every launch of this graph and of whatever is made from it.
    unsafe fn add_host(
        &self,
        deps: &[sys::CUgraphNode],
        call: HostFn,
        data: *mut c_void,
    ) -> Result<GraphNode<'_>, Error> {
        let params = sys::CUDA_HOST_NODE_PARAMS {
            fn_: Some(call),
            userData: data,
        };
        let deps_ptr = if deps.is_empty() {
            ptr::null()
        } else {
            deps.as_ptr()
        };
        let mut raw: sys::CUgraphNode = ptr::null_mut();
        // SAFETY: valid graph, nodes of this graph, parameters and out-pointer.
        unsafe { sys::cuGraphAddHostNode(&mut raw, self.raw, deps_ptr, deps.len(), &params)? };
        Ok(GraphNode {
            raw,
            graph: self.raw,
            _graph: PhantomData,
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let raw = Handle::new(self.raw);
        reaper::destroy(self.ctx.take(), move || {
            // SAFETY: we own the graph. Its references to user objects go with it; clones and
            // executables keep their own.
            let _ = unsafe { sys::cuGraphDestroy(raw.into_inner()) };
        });
    }
}

/// An executable graph (`CUgraphExec`), destroyed on drop (an in-flight launch finishes first,
/// with its closures alive).
///
/// `Send` but not `Sync`: CUDA does not synchronise concurrent use of one executable.
#[derive(Debug)]
pub struct GraphExec {
    raw: sys::CUgraphExec,
    ctx: Option<Context>,
}

// SAFETY: an executable may be used from any thread, one at a time (`GraphExec` is not `Sync`).
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Launches the executable on `stream` (`cuGraphLaunch`).
    ///
    /// The one call of this crate that does not first run the destructions deferred by
    /// callbacks (handles dropped inside a closure): it costs one check and the driver's call
    /// (48 instructions over the stub driver, C's own call 43). The reaper thread runs them,
    /// woken by the callback that deferred them, so a program that only launches graphs sees
    /// them run without another call (`bench/cpu/tests/stub/stub_driver.rs`: before the next
    /// launch).
    #[inline]
    pub fn launch(&self, stream: &Stream) -> Result<(), Error> {
        // The one entry check without the deferred destructions (see the method's docs): a
        // thread-local test, then the call through cuGraphLaunch's entry point as the
        // function's last act (no stack frame).
        if crate::inside::in_callback() {
            return Err(Error::InCallback {
                operation: "GraphExec::launch",
            });
        }
        // `instantiate` resolved cuGraphLaunch: its entry point holds the driver's function, so
        // every status is the driver's (none is the first-call stub's UNRESOLVED).
        let launch = sys::entry::cuGraphLaunch.function();
        // SAFETY: both handles are valid while borrowed.
        let code = unsafe { launch(self.raw, stream.as_raw()) };
        Ok(cuda_hostcb::load::resolved_driver_result(
            "cuGraphLaunch",
            code.0,
        )?)
    }

    /// Launches the executable on `stream`, as [`launch`](Self::launch), and returns the
    /// [`Completion`](crate::Completion) of that launch (and of the stream's work before it), as
    /// [`Stream::completion`] would right after.
    pub fn launch_completion(&self, stream: &Stream) -> Result<crate::Completion, Error> {
        self.launch(stream)?;
        stream.completion()
    }

    /// Updates the executable from `graph`, of the same topology (`cuGraphExecUpdate`). The
    /// executable then holds `graph`'s closures; the ones it held before are dropped once no
    /// earlier launch needs them.
    pub fn update(&mut self, graph: &Graph) -> Result<(), Error> {
        callback::enter("GraphExec::update")?;
        let mut info = sys::CUgraphExecUpdateResultInfo {
            result: sys::CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_SUCCESS,
            errorNode: ptr::null_mut(),
            errorFromNode: ptr::null_mut(),
        };
        // SAFETY: valid executable, graph and out-pointer.
        match unsafe { sys::cuGraphExecUpdate(self.raw, graph.as_raw(), &mut info) } {
            Ok(()) => Ok(()),
            Err(source)
                if source.code() == Some(sys::CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE.0) =>
            {
                Err(Error::UpdateRejected {
                    reason: update_result_name(info.result),
                    source,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The raw executable; valid while `self` lives.
    pub fn as_raw(&self) -> sys::CUgraphExec {
        self.raw
    }

    /// The context the executable was instantiated in.
    pub fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        let raw = Handle::new(self.raw);
        reaper::destroy(self.ctx.take(), move || {
            // SAFETY: we own the executable; CUDA defers freeing it (and releasing its user
            // objects) until its launches have finished.
            let _ = unsafe { sys::cuGraphExecDestroy(raw.into_inner()) };
        });
    }
}

fn update_result_name(result: sys::CUgraphExecUpdateResult) -> &'static str {
    use sys::CUgraphExecUpdateResult as R;
    match result {
        R::CU_GRAPH_EXEC_UPDATE_SUCCESS => "CU_GRAPH_EXEC_UPDATE_SUCCESS",
        R::CU_GRAPH_EXEC_UPDATE_ERROR => "CU_GRAPH_EXEC_UPDATE_ERROR",
        R::CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED => {
            "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED"
        }
        R::CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED => {
            "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED"
        }
        R::CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED => {
            "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED"
        }
        R::CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED => {
            "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED"
        }
        R::CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED => "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED",
        R::CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE => {
            "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE"
        }
        R::CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED => {
            "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED"
        }
        _ => "an unknown CUgraphExecUpdateResult",
    }
}

/// How [`Graph::instantiate_with`] instantiates a graph: CUDA's instantiation flags
/// (`CUgraphInstantiate_flags`), chosen one call at a time; [`Instantiate::new`] is none of
/// them, as [`Graph::instantiate`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Instantiate<'s> {
    flags: u64,
    upload: Option<&'s Stream>,
}

impl<'s> Instantiate<'s> {
    /// No flag.
    pub fn new() -> Instantiate<'s> {
        Instantiate::default()
    }

    /// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`: memory the graph's allocation nodes
    /// allocated in one launch and no node freed is freed before the next launch, which CUDA
    /// otherwise refuses.
    pub fn auto_free_on_launch(self) -> Instantiate<'s> {
        self.with(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
    }

    /// `CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY`: each kernel node runs at the priority
    /// its launch attributes give it, not its stream's.
    pub fn use_node_priority(self) -> Instantiate<'s> {
        self.with(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
    }

    /// `CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD`: the executable is uploaded to the device on
    /// `stream` as it is instantiated, so that its first launch does not pay for it.
    pub fn upload(self, stream: &'s Stream) -> Instantiate<'s> {
        Instantiate {
            upload: Some(stream),
            ..self.with(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
        }
    }

    fn with(self, flag: sys::CUgraphInstantiate_flags) -> Instantiate<'s> {
        Instantiate {
            flags: self.flags | u64::from(flag),
            ..self
        }
    }
}
