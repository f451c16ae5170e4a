//! Safe host callbacks over the generated bindings: Rust closures on streams and in graphs whose
//! lifetime is right by construction, through capture and replay, with contained panics.
//!
//! # Targets
//!
//! One module per enabled CUDA toolkit target, like `cuda-hostcb`: [`ctk_13_0`] (feature
//! `ctk-13-0`, the default), `ctk_12_9` (`ctk-12-9`) and `ctk_13_5` (`ctk-13-5`). Each has the
//! same API ([`Context`](ctk_13_0::Context), [`Stream`](ctk_13_0::Stream),
//! [`Graph`](ctk_13_0::Graph), [`GraphExec`](ctk_13_0::GraphExec),
//! [`GraphNode`](ctk_13_0::GraphNode)) over that target's driver bindings, re-exported as `sys`.
//!
//! ```no_run
//! # fn main() -> Result<(), cuda_hostcb_safe::Error> {
//! use cuda_hostcb_safe::ctk_13_0::{Context, Graph, Stream};
//!
//! let ctx = Context::primary(0)?;
//! ctx.make_current()?;
//! let stream = Stream::new(&ctx)?;
//! stream.launch(|| println!("once, after the work before it"))?;
//!
//! let graph = Graph::new(&ctx)?;
//! let first = graph.add_host_node(&[], || println!("every launch"))?;
//! graph.add_host_node(&[first], || println!("then this"))?;
//! let exec = graph.instantiate()?;
//! drop(graph); // the executable keeps the closures alive
//! exec.launch(&stream)?;
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! # Who owns a closure
//!
//! - [`Stream::launch`](ctk_13_0::Stream::launch) (`FnOnce`) on a stream that is not capturing:
//!   the closure is boxed, called once by the stream, and dropped right after its call. On a
//!   capturing stream it is refused ([`Error::CapturingStream`]): a captured host function runs on
//!   every launch of the graph, so a one-shot closure cannot be captured honestly.
//! - [`Stream::launch_fn`](ctk_13_0::Stream::launch_fn) (`Fn + Send + Sync`): on a plain stream
//!   as above; on a capturing stream (found with `cuStreamGetCaptureInfo`, not asked of the
//!   caller) the closure is owned by a CUDA user object moved into the graph being captured:
//!   one user object per capture and thread, which holds every closure that thread captures
//!   into that capture (kept in blocks, not one allocation each) and drops each once.
//! - [`Graph::add_host_node`](ctk_13_0::Graph::add_host_node) (`Fn + Send + Sync`): owned by a
//!   CUDA user object moved into the graph (`cuGraphRetainUserObject(.., CU_GRAPH_USER_OBJECT_MOVE)`).
//!   CUDA copies that reference into clones and executables and holds it for in-flight launches,
//!   so the closure lives as long as any of them and is dropped exactly once, by the user
//!   object's destructor, after the last one goes.
//! - The raw path stays: [`Stream::launch_raw`](ctk_13_0::Stream::launch_raw) and
//!   [`Graph::add_host_node_raw`](ctk_13_0::Graph::add_host_node_raw) hand a caller-owned
//!   pointer and an `extern "C"` function to CUDA unchanged.
//!
//! # Inside a callback
//!
//! A closure runs on a CUDA thread where CUDA calls are not permitted. A panic is caught and
//! reported through the hook of [`set_panic_hook`] (default: [`default_panic_hook`], a line on
//! stderr); the launch, the synchronisation and the work after the callback go on normally.
//! Calls into this crate from inside a callback return [`Error::InCallback`], and a handle of
//! this crate (a stream, graph, executable or context) dropped there is destroyed later, on the
//! next call of this crate from an ordinary thread. With `panic = "abort"` a panic aborts.
//!
//! # Threads and contexts
//!
//! Driver calls use the calling thread's current context: call
//! [`Context::make_current`](ctk_13_0::Context::make_current) once on each thread that launches
//! work. Constructors ([`Stream::new`](ctk_13_0::Stream::new), [`Graph::instantiate`](ctk_13_0::Graph::instantiate))
//! select their context themselves. Handles keep their context alive. [`Stream`](ctk_13_0::Stream),
//! [`Graph`](ctk_13_0::Graph) and [`GraphExec`](ctk_13_0::GraphExec) are `Send` but not `Sync`
//! (CUDA graphs are not internally synchronised; a stream's capture state is checked and used in
//! one step); [`Context`](ctk_13_0::Context) is both.

// Without a target the callback machinery has no user; the workspace's own builds enable every
// target, so these lints still run there.
#![cfg_attr(not(feature = "all-targets"), allow(dead_code, unused_imports))]

mod arena;
mod callback;
mod capture;
mod error;
mod panic;

pub use capture::{CaptureMode, CaptureStatus};
pub use error::Error;
pub use panic::{
    CallbackPanic, PanicHook, PanicStage, default_panic_hook, set_panic_hook, take_panic_hook,
};

/// One module per target enabled on `cuda-hostcb` (`cuda_hostcb::for_each_target!`), each
/// compiling the same source (`src/target/`) over that target's driver bindings.
macro_rules! safe_target {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        #[doc = concat!("The safe layer over the bindings generated from the CTK ", $version, " headers.")]
        #[path = "target"]
        #[allow(
            clippy::duplicate_mod,
            reason = "every target compiles the same source"
        )]
        pub mod $target {
            /// The raw driver bindings of this target, for what the safe layer does not cover.
            pub use cuda_hostcb::$target::driver as sys;

            mod context;
            mod graph;
            mod stream;

            pub use context::Context;
            pub use graph::{Graph, GraphExec, GraphNode};
            pub use stream::Stream;

            capture_info!([$($capability)*]);
        }
    };
}

/// Defines `capture_info(stream, status, id, graph)` in a target module: the stream's capture
/// status, the capture sequence's id and the graph, through the newest `cuStreamGetCaptureInfo` the target declares (`_v3` from CTK
/// 12.3, `_v2` before; its capabilities say which).
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

cuda_hostcb::for_each_target!(safe_target);
