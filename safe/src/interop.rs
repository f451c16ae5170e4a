//! Graphs that another crate made (its captures, its graphs), borrowed, so that host nodes with
//! closures can be added to them; contexts are borrowed with [`Context::borrow_raw`] and streams
//! with [`Stream::borrow_raw`](crate::Stream::borrow_raw).

use std::mem::ManuallyDrop;
use std::ops::Deref;

use crate::{Context, Graph, sys};

/// A [`Graph`] that someone else owns ([`Graph::borrow_raw`]): it works as a graph (through
/// `Deref`), and dropping it leaves the CUDA graph alone.
///
/// Closures added to it are owned by CUDA user objects moved into the graph, as with an owned
/// graph: they live until the owner destroys the graph and every clone, executable and launch
/// made from it is gone.
#[derive(Debug)]
pub struct BorrowedGraph(ManuallyDrop<Graph>);

impl Graph {
    /// Wraps a graph that someone else owns (e.g. one that another crate captured); `ctx`, if
    /// given, is kept alive with the wrapper and made current to instantiate it.
    ///
    /// # Safety
    /// `raw` is a valid graph for as long as the returned wrapper (and any node it returns) is
    /// used, not used by another thread meanwhile (CUDA graphs are not internally
    /// synchronised), and, if `ctx` is given, a graph of that context's device.
    pub unsafe fn borrow_raw(raw: sys::CUgraph, ctx: Option<&Context>) -> BorrowedGraph {
        // SAFETY: the caller's contract; `BorrowedGraph` never destroys it.
        BorrowedGraph(ManuallyDrop::new(unsafe {
            Graph::from_raw(raw, ctx.cloned())
        }))
    }
}

impl Deref for BorrowedGraph {
    type Target = Graph;

    fn deref(&self) -> &Graph {
        &self.0
    }
}

impl Drop for BorrowedGraph {
    fn drop(&mut self) {
        // SAFETY: taken once, here; the graph is then split without being destroyed, and only
        // the context handle is dropped.
        let graph = unsafe { ManuallyDrop::take(&mut self.0) };
        drop(graph.into_parts());
    }
}
