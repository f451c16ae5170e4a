//! Safe host callbacks over the generated bindings: Rust closures on streams and in graphs whose
//! lifetime is right by construction, through capture and replay, with contained panics.
//!
//! # Quick start
//!
//! ```toml
//! [dependencies]
//! cuda-hostcb-safe = "0.1"   # over the newest target of cuda-hostcb
//! ```
//!
//! A closure on a stream, called once, and one in a graph, called on every launch:
//!
//! ```no_run
//! use cuda_hostcb_safe::{Context, Graph, Stream};
//!
//! fn main() -> Result<(), cuda_hostcb_safe::Error> {
//!     let ctx = Context::primary(0)?;
//!     ctx.make_current()?;
//!     let stream = Stream::new(&ctx)?;
//!     stream.launch(|| println!("once"))?; // FnMut, called once, then dropped
//!     let graph = Graph::new(&ctx)?;
//!     let first = graph.add_host_node(&[], || println!("every launch"))?; // owned by a CUDA user object
//!     graph.add_host_node(&[first], || println!("then this"))?;
//!     let exec = graph.instantiate()?;
//!     drop(graph); // the executable keeps the closures alive
//!     exec.launch(&stream)?;
//!     stream.synchronize()?;
//!     Ok(())
//! }
//! ```
//!
//! # One layer, every driver
//!
//! The safe layer is compiled once, over the driver bindings of the newest target of
//! `cuda-hostcb` (its feature `newest-target`, which this crate enables), re-exported as
//! [`sys`]. Those bindings resolve each function at run time through `cuGetProcAddress` at the
//! ABI version its declaration needs, so the layer runs on every driver that has the functions
//! it calls, and what a driver lacks is found at run time, where it is used:
//!
//! - Host sync modes (`cuLaunchHostFunc_v2`, a host node's `syncMode`): the installed driver's
//!   version is asked once (`cuDriverGetVersion`); below CUDA 13.2 the calls that take a mode
//!   return [`Error::SyncModeUnavailable`] ([`SyncModeMissing::Driver`]).
//! - The capture of a stream (`cuStreamGetCaptureInfo_v3`, CUDA 12.3; the newest headers no
//!   longer declare `_v2`): on an older driver `Stream::launch_fn` asks `cuStreamIsCapturing`
//!   instead, so a plain stream works as everywhere; capturing a closure there returns the
//!   typed `Unavailable` error of `_v3` (in [`Error::Cuda`]), which names the version it needs.
//! - Any other function newer than the driver: [`Error::Cuda`] with `cuda_hostcb`'s
//!   `Unavailable`, naming the function and the version it needs. The layer calls no runtime
//!   function, so the runtime's version never matters to it.
//!
//! Which of those functions the bindings declare is the one thing fixed at compile time, by the
//! newest target's capabilities: were the newest target listed older than CTK 13.2 (none this
//! repository lists is), sync modes would return [`SyncModeMissing::Target`], and before CTK
//! 12.3 the capture would be asked of `cuStreamGetCaptureInfo_v2`.
//!
//! There is no module per target: the handles the layer wraps are the same C objects whatever
//! headers a program's own raw calls were generated from, and the same Rust types too
//! (`cuda_hostcb::common`): a program that uses an older target's bindings, or the runtime API,
//! passes its raw handles to and from the layer as they are (`Stream::borrow_raw(raw)`, where
//! `raw` is a `cudaStream_t`; `stream.as_raw()` to any target's `cuStreamSynchronize`).
//!
//! # Who owns a closure
//!
//! - `Stream::launch` (`FnMut`, called once, by reference) on a stream that is not capturing:
//!   the closure is boxed and enqueued as a stream callback (`cuStreamAddCallback`), which CUDA
//!   makes exactly once: with success, and the closure runs, or, once the context has hit an
//!   error (a kernel that trapped), with that error, and the closure is dropped uncalled and
//!   counted; the stream's next `synchronize` returns [`Error::HostFunctionsSkipped`]. Either
//!   way the reaper thread drops it afterwards (see [Drops](#drops)). On a capturing stream it
//!   is refused ([`Error::CapturingStream`]): a captured host function runs on every launch of
//!   the graph, so a one-shot closure cannot be captured honestly.
//! - `Stream::launch_fn` (`Fn + Send + Sync`): on a plain stream as above; on a capturing stream
//!   (found with `cuStreamGetCaptureInfo`, not asked of the caller) the closure is owned by a CUDA
//!   user object moved into the graph being captured: one user object per capture and thread,
//!   which holds every closure that thread captures into that capture (kept in blocks, not one
//!   allocation each) and drops each once.
//! - `Graph::add_host_node` (`Fn + Send + Sync`): owned by a CUDA user object moved into the graph
//!   (`cuGraphRetainUserObject(.., CU_GRAPH_USER_OBJECT_MOVE)`). CUDA copies that reference into
//!   clones and executables and holds it for in-flight launches, so the closure lives as long as
//!   any of them and is dropped exactly once, after the last one goes.
//! - `UpdatableExec::set_host_node` (`Fn + Send + Sync`, an executable made by
//!   `Graph::instantiate_updatable`): owned by a store of the executable, which the executable
//!   and its launches hold through a user object; a replaced closure is dropped once no launch
//!   can call it any more (the type's documentation says when).
//! - `Stream::completion` holds no closure: its future checks an event recorded after the work
//!   (on the awaiting task for up to [`COMPLETION_SPIN`], then on the waiter thread,
//!   [`WAITER_THREAD_NAME`]); after a context error it resolves to
//!   [`Error::CompletionAbandoned`]. `GraphExec::launch_completion` and
//!   `UpdatableExec::launch_completion` launch and return the same future.
//! - The raw path stays: `Stream::launch_raw` and `Graph::add_host_node_raw` hand a caller-owned
//!   pointer and an `extern "C"` function to CUDA unchanged.
//!
//! The same, as a table (the holder's type names where it lives in this crate's source):
//!
//! | closure given to | holder (source) | dropped when | on which thread |
//! | --- | --- | --- | --- |
//! | `Stream::launch` | a one-shot cell, enqueued with `cuStreamAddCallback` (`once::StreamCell`, `once::OneShot`) | after CUDA's one callback: run, or skipped after a context error | the reaper |
//! | `Stream::launch_with_sync_mode` | a guarded cell (`guarded::GuardedCell`) called by `cuLaunchHostFunc_v2`, and a guard stream callback right after it | after the guard's callback, called or skipped | the reaper |
//! | `Stream::launch_fn`, plain stream | as `Stream::launch` | as `Stream::launch` | the reaper |
//! | `Stream::launch_fn`, capturing stream | the capture's arena (`arena::Arena`), owned by a user object moved into the captured graph | after the last graph, clone, executable and launch holding it | the reaper |
//! | `Graph::add_host_node` | a shared cell (`shared::Shared`), owned by a user object moved into the graph | as above | the reaper |
//! | `UpdatableExec::set_host_node` | the executable's store (`exec_update`), held through a user object | once no launch can call it (replaced, or the executable gone) | the reaper |
//! | `Graph::keep`, `Stream::keep_in_capture` (any `Send + 'static` value) | a box owned by a user object moved into the graph (`graph::give_to_graph`, as for every row above that names one) | after the last graph, clone, executable and launch holding it | the reaper |
//! | `Stream::launch_raw`, `Graph::add_host_node_raw` | you | when you drop it | yours |
//!
//! A CUDA handle (stream, graph, executable, completion) dropped inside a closure is destroyed
//! by the reaper thread, or by the next call of this crate from an ordinary thread if that
//! comes first (`reaper`; any call but `GraphExec::launch`, whose fast path skips that
//! check); one that the closure owns goes with the closure, on the reaper thread. Either way
//! before its context's release: each destruction holds its context's retain until it has run,
//! and the program's last `Context` handle runs the queue before it goes (`deferral`).
//!
//! # After a context error
//!
//! Once a context has hit a device error, CUDA calls no host function again. What the user gets:
//!
//! - One-shot closures (`Stream::launch`, `Stream::launch_fn` on a plain stream): dropped uncalled, each once; `Stream::synchronize` reports how many
//!   with the error, after waiting (up to 2 s) until CUDA has made every callback of the
//!   closures enqueued through that `Stream`. A thread waiting for such a closure returns if it
//!   waits for its drop (a channel whose sender the closure owns). A completion future
//!   resolves to [`Error::CompletionAbandoned`].
//! - Closures in graphs (host nodes, captured closures): not called by launches after the error
//!   (CUDA cannot report a skipped host node), and dropped when the graph, its clones and
//!   executables are dropped, as always. Wait for their drop, not their call.
//! - `Stream::launch_with_sync_mode` (`cuLaunchHostFunc_v2`, for which CUDA offers no callback
//!   that reports errors): its closure is neither called nor dropped (leaked); use
//!   `Stream::launch` where that matters.
//!
//! # Drops
//!
//! CUDA calls host functions and user-object destructors on threads of its own, where every
//! CUDA call fails with `CUDA_ERROR_NOT_PERMITTED`, so a captured value whose `Drop` frees
//! device memory would leak it there. No closure is dropped on a CUDA thread: each is handed to
//! the reaper, a thread of this crate ([`REAPER_THREAD_NAME`]), which drops it (with what it
//! captures) on a program thread. [`wait_for_drops`] waits until every closure handed over so
//! far is dropped, [`pending_drops`] counts those that wait. The backlog holds [`BACKLOG`]
//! closures; when it is full (a `Drop` on the reaper that blocks for long), a closure is dropped
//! where it is, on CUDA's thread, and counted ([`overflowed_drops`]): handing over never blocks
//! CUDA. A closure with nothing to drop (no `Drop` anywhere in what it captures) is just freed
//! where it is. The reaper has no current context: a `Drop` that calls CUDA makes its context
//! current itself (as cudarc's types do). Closures still waiting when the process exits are not
//! dropped.
//!
//! # Inside a callback
//!
//! A closure runs on a CUDA thread where CUDA calls are not permitted. A panic is caught and
//! reported through the hook of [`set_panic_hook`] (default: [`default_panic_hook`], a line on
//! stderr); the launch, the synchronisation and the work after the callback go on normally. A
//! panic in a closure's `Drop` is reported the same way, from the reaper thread.
//! Calls into this crate from inside a callback return [`Error::InCallback`], and a handle of
//! this crate (a stream, graph, executable, completion or context) dropped there (by the
//! closure's body) is destroyed later, by the reaper thread or the next call of this crate from
//! an ordinary thread (other than `GraphExec::launch`), and before its context's release; one
//! that the closure owns is destroyed by the reaper when the closure is dropped. With `panic = "abort"` a
//! panic aborts.
//!
//! # Threads and contexts
//!
//! Driver calls use the calling thread's current context: call `Context::make_current` once on
//! each thread that launches work. Constructors (`Stream::new`, `Graph::instantiate`) select
//! their context themselves. Handles keep their context alive. `Stream`, `Graph` and `GraphExec`
//! are `Send` but not `Sync` (CUDA graphs are not internally synchronised; a stream's capture
//! state is checked and used in one step); `Context` is both.

mod arena;
mod callback;
mod capture;
mod completion;
mod context;
mod error;
mod exec_update;
mod graph;
mod guarded;
mod inside;
mod interop;
mod once;
mod panic;
mod protocol;
mod reaper;
mod record;
mod shared;
mod sticky;
mod stream;
mod sync;
mod sync_mode;
mod waiter;

pub use capture::{CaptureMode, CaptureStatus};
pub use completion::Completion;
pub use context::Context;
pub use error::Error;
pub use error::{HostSyncMode, SYNC_MODE_DRIVER_VERSION, SyncModeMissing};
pub use exec_update::{NodeId, UpdatableExec};
pub use graph::{Graph, GraphExec, GraphNode, Instantiate};
pub use interop::BorrowedGraph;
pub use panic::{
    CallbackPanic, PanicHook, PanicStage, default_panic_hook, set_panic_hook, take_panic_hook,
};
pub use reaper::{BACKLOG, REAPER_THREAD_NAME, overflowed_drops, pending_drops, wait_for_drops};
pub use stream::Stream;
pub use waiter::{COMPLETION_SPIN, WAITER_THREAD_NAME};

/// Names the newest target's driver bindings [`sys`] and its CTK version `CTK`, and compiles
/// what depends on which functions its headers declare: `host_v2` (sync modes, capability
/// `host_func_v2`, CTK 13.2 on) and `capture_info` (`cuStreamGetCaptureInfo_v3`, capability
/// `capture_info_v3`, CTK 12.3 on). Every target this repository lists declares both; a list
/// whose newest target is older still builds, and refuses what its headers lack.
macro_rules! newest {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        /// The raw driver bindings the safe layer is compiled over (those of the newest target
        /// of `cuda-hostcb`), for what it does not cover. A function newer than the installed
        /// driver returns `Unavailable` when called.
        pub use cuda_hostcb::$target::driver as sys;

        /// The CTK version of the headers of [`sys`].
        const CTK: &str = $version;

        host_v2!([$($capability)*]);
        capture_info!([$($capability)*]);
    };
}

/// Declares `host_v2`: `host_v2.rs` where the headers declare host sync modes (capability
/// `host_func_v2`), else `host_v1.rs`, which refuses them.
macro_rules! host_v2 {
    ([]) => {
        #[path = "host_v1.rs"]
        mod host_v2;
    };
    ([host_func_v2 $($rest:ident)*]) => {
        mod host_v2;
    };
    ([$other:ident $($rest:ident)*]) => {
        host_v2!([$($rest)*]);
    };
}

/// Defines `capture_info(stream, status, id, graph)`: the stream's capture status, the capture
/// sequence's id and the graph, through the newest `cuStreamGetCaptureInfo` the headers declare
/// (`_v3` from CTK 12.3, `_v2` before; the capabilities say which).
macro_rules! capture_info {
    ([]) => {
        capture_info!(@define cuStreamGetCaptureInfo_v2, []);
    };
    ([capture_info_v3 $($rest:ident)*]) => {
        // `_v3` adds the edge data output, before the dependency count.
        capture_info!(@define cuStreamGetCaptureInfo_v3, [std::ptr::null_mut()]);
    };
    ([$other:ident $($rest:ident)*]) => {
        capture_info!([$($rest)*]);
    };
    (@define $function:ident, [$($edge_data:expr)?]) => {
        #[doc = concat!("`", stringify!($function), "`: the capture status, capture id and graph of `stream`.")]
        ///
        /// # Safety
        ///
        /// `stream` is a valid stream of the current context.
        #[inline]
        unsafe fn capture_info(
            stream: sys::CUstream,
            status: &mut sys::CUstreamCaptureStatus,
            id: &mut u64,
            graph: &mut sys::CUgraph,
        ) -> Result<(), cuda_hostcb::Error> {
            // SAFETY: the caller passes a valid stream; the outputs not wanted are null.
            unsafe {
                sys::$function(
                    stream,
                    status,
                    id,
                    graph,
                    std::ptr::null_mut(),
                    $($edge_data,)?
                    std::ptr::null_mut(),
                )
            }
        }
    };
}

cuda_hostcb::newest_target!(newest);

/// The crate's README (its crates.io page), whose Rust blocks are compiled as doctests so that
/// they stay true as written.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

// One Rust type per C type: every handle the layer gives or takes is the type of that handle in
// every target's driver and runtime bindings, so no program needs a cast to cross them. A
// compile-time check: this module does not build if a target defines one of these on its own.
#[cfg(test)]
mod one_type_per_c_type {
    macro_rules! the_same_handles {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            const _: () = {
                use cuda_hostcb::$target::{driver as cu, runtime as rt};
                #[allow(dead_code, reason = "compiled, not called")]
                fn handles(
                    ctx: &crate::Context,
                    stream: &crate::Stream,
                    graph: &crate::Graph,
                    exec: &crate::GraphExec,
                    node: &crate::NodeId,
                ) {
                    let _: (cu::CUcontext, cu::CUstream, rt::cudaStream_t) =
                        (ctx.as_raw(), stream.as_raw(), stream.as_raw());
                    let _: (cu::CUgraph, rt::cudaGraph_t) = (graph.as_raw(), graph.as_raw());
                    let _: (cu::CUgraphExec, rt::cudaGraphExec_t) = (exec.as_raw(), exec.as_raw());
                    let _: (cu::CUgraphNode, rt::cudaGraphNode_t) = (node.as_raw(), node.as_raw());
                    let raw: rt::cudaStream_t = stream.as_raw();
                    // SAFETY: never called; borrow_raw takes the runtime's handle as it is.
                    let _ = || unsafe { crate::Stream::borrow_raw(raw) };
                }
            };
        };
    }
    cuda_hostcb::for_each_target!(the_same_handles);
}
