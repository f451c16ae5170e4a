//! Executables whose host nodes take new closures without being instantiated again
//! (`cuGraphExecHostNodeSetParams`; `cuGraphExecNodeSetParams` with a sync mode), named by
//! [`NodeId`]s that stay valid as long as the executable, and the store that keeps each closure
//! exactly as long as a launch may still call it.
//!
//! CUDA cannot retain a user object on an executable (`cuGraphRetainUserObject` takes a graph).
//! As cuda.core does, the store is owned by a user object that the graph holds only while it is
//! instantiated, so the executable and each of its launches hold the store from then on, and
//! CUDA drops it after the executable is destroyed and its last launch has finished. Unlike
//! cuda.core's append-only store, this one also lets replaced closures go while the executable
//! lives (see [`UpdatableExec`]).

use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;

use crate::callback::{self, HostFn};
use crate::context::push;
use crate::graph::give_to_graph;
use crate::panic::{PanicStage, report};
use crate::protocol::store;
use crate::shared::{Shared, call_shared};
use crate::{Context, Graph, GraphExec, GraphNode, Instantiate, Stream, host_v2, sync_mode, sys};
use crate::{Error, HostSyncMode};

/// A node of the graph an [`UpdatableExec`] was instantiated from, without the borrow of the
/// graph: [`GraphNode::id`]. It names the node for as long as the executable lives (the
/// executable keeps its graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId {
    raw: sys::CUgraphNode,
    graph: sys::CUgraph,
}

// SAFETY: a `NodeId` is a name: the safe layer passes it to CUDA only after checking that it
// names a node of the graph the executable keeps alive.
unsafe impl Send for NodeId {}
// SAFETY: as above; it is immutable.
unsafe impl Sync for NodeId {}

impl NodeId {
    /// The raw node (valid while its graph lives).
    pub fn as_raw(&self) -> sys::CUgraphNode {
        self.raw
    }
}

impl GraphNode<'_> {
    /// This node's [`NodeId`], to update it in an [`UpdatableExec`] made from its graph.
    pub fn id(&self) -> NodeId {
        NodeId {
            raw: self.as_raw(),
            graph: self.graph_raw(),
        }
    }
}

/// A closure owned by the store, boxed for CUDA; dropping it drops the closure.
struct Owned<G>(*mut G);

// SAFETY: `G: Send + Sync`; the box is only read by CUDA's calls and dropped once, by its owner.
unsafe impl<G: Send + Sync> Send for Owned<G> {}
// SAFETY: as above.
unsafe impl<G: Send + Sync> Sync for Owned<G> {}

impl<G> Drop for Owned<G> {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` in `version` and is dropped only here.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// What owns a closure in the store.
type Owner = Box<dyn Any + Send + Sync>;
/// The closures of one executable that a launch may still call (the protocol:
/// [`crate::protocol::store`]).
type Store = store::Store<Owner>;
type Held = store::Held<Owner>;

/// Closures a launch's call proved unused, dropped one by one (each drop panic reported).
struct Retired(Vec<(u64, Held)>);

impl Drop for Retired {
    fn drop(&mut self) {
        for held in self.0.drain(..) {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(held))) {
                report(PanicStage::Drop, payload);
            }
        }
    }
}

/// The store's address, for the closures it owns: they are only called while it lives.
#[derive(Clone, Copy)]
struct StorePtr(*const Store);

// SAFETY: `Store` is `Sync`; the pointer is only dereferenced while the store is alive.
unsafe impl Send for StorePtr {}
// SAFETY: as above.
unsafe impl Sync for StorePtr {}

impl StorePtr {
    /// # Safety
    /// The store is alive.
    unsafe fn called(self, generation: u64) {
        // SAFETY: the caller's contract.
        unsafe { &*self.0 }.called(generation, |due| {
            // Off CUDA's thread: the reaper drops them.
            crate::reaper::drop_boxed(Box::new(Retired(due)));
        });
    }
}

/// Boxes `f` for installation at `generation`: it runs `f`, then lets the store free what the
/// call proves no launch needs. Returns the host function, its user data and the owner.
fn version<F>(store: StorePtr, generation: u64, f: F) -> (HostFn, *mut c_void, Held)
where
    F: Fn() + Send + Sync + 'static,
{
    fn boxed<G: Fn() + Send + Sync + 'static>(g: G) -> (HostFn, *mut c_void, Owned<G>) {
        let raw = Box::into_raw(Box::new(g));
        (call_shared::<G>, raw.cast(), Owned(raw))
    }
    let (call, data, owner) = boxed(move || {
        let ran = catch_unwind(AssertUnwindSafe(&f));
        // SAFETY: this closure is owned by the store, and CUDA calls it only while the
        // executable or a launch of it holds the store (see `Store` and `hold_in`).
        unsafe { store.called(generation) };
        if let Err(payload) = ran {
            resume_unwind(payload);
        }
    });
    let held = Held::new(generation, Box::new(owner));
    (call, data, held)
}

/// Instantiates `graph` with `store` held by the executable: a user object that owns one `Arc`
/// of the store is retained by the graph for the instantiation only, so that the executable
/// copies the reference and the graph lets its own go.
fn hold_in(graph: &Graph, store: &Arc<Store>, how: Instantiate<'_>) -> Result<GraphExec, Error> {
    let keep = Arc::clone(store);
    let (_, destroy, discard, data) = Shared::new(move || {
        let _keep = &keep;
    })
    .into_parts();
    // SAFETY: `destroy` (the reaper's drop) and `discard` (a drop here) each drop the box behind
    // `data` once; it was given up.
    let object = unsafe { give_to_graph(graph.as_raw(), data, destroy, discard)? };
    let exec = graph.instantiate_with(how);
    // SAFETY: the graph holds the one reference moved into it above.
    let released = unsafe { sys::cuGraphReleaseUserObject(graph.as_raw(), object, 1) };
    let exec = exec?;
    released?;
    Ok(exec)
}

/// An executable graph whose host nodes can be given new closures
/// ([`set_host_node`](Self::set_host_node)) without being instantiated again; made by
/// [`Graph::instantiate_updatable`], which hands it the graph, so that [`NodeId`]s of the
/// graph's nodes stay valid as long as it.
///
/// ```no_run
/// # async fn run() -> Result<(), cuda_hostcb_safe::Error> {
/// use cuda_hostcb_safe::HostSyncMode;
/// use cuda_hostcb_safe::{Context, Graph, Stream};
///
/// let ctx = Context::primary(0)?;
/// ctx.make_current()?;
/// let stream = Stream::new(&ctx)?;
/// let graph = Graph::new(&ctx)?;
/// let node = graph.add_host_node(&[], || println!("first closure"))?.id(); // a NodeId: no borrow
/// let mut exec = graph.instantiate_updatable()?; // keeps the graph, so NodeIds stay valid
/// exec.launch(&stream)?;
/// exec.set_host_node(node, || println!("from the next launch on"))?; // no re-instantiation
/// exec.launch_completion(&stream)?.await?; // a Future: the launch is done
/// stream.launch_with_sync_mode(HostSyncMode::SpinWait, || {})?; // needs a CUDA 13.2 driver
/// # Ok(()) }
/// ```
///
/// # Who owns a closure set on a node
///
/// A store of this executable, which the executable and each of its launches hold (a CUDA user
/// object): CUDA drops the store, with every closure in it, after the executable is dropped and
/// its last launch has finished. Within that, a replaced closure goes as soon as nothing can
/// call it any more:
///
/// - at once, on the updating thread, if no launch was made (through [`launch`](Self::launch))
///   while it was current;
/// - otherwise when a launch made after its replacement runs any closure of the store: CUDA runs
///   the launches of one executable one after another, so every launch that could still call
///   it has finished by then. That call hands it to the reaper thread, which drops it.
///
/// So the store holds the current closure of each node set through it, plus the closures
/// replaced since the start of the oldest launch that has not yet run one of the store's
/// closures: with `k` launches pending and `u` updates between launches, about `k * u`
/// ([`held_closures`](Self::held_closures) reports it). A launch whose nodes of the store do
/// not run (a disabled node) frees nothing until a later one does.
///
/// Launch it only through [`launch`](Self::launch): a raw `cuGraphLaunch` of
/// [`as_raw`](Self::as_raw) is not seen by the store, which could then free a closure that
/// launch calls. A host node added with a sync mode keeps it only through
/// [`set_host_node_with_sync_mode`](Self::set_host_node_with_sync_mode).
///
/// `Send` but not `Sync`, like [`GraphExec`]; an update takes `&mut self`, so no launch through
/// this handle runs concurrently with it.
#[derive(Debug)]
pub struct UpdatableExec {
    exec: GraphExec,
    graph: Graph,
    store: Arc<Store>,
    /// The generation of the latest update (0: none yet).
    generation: u64,
    /// The generation at the latest launch.
    launched_at: Cell<u64>,
}

impl Graph {
    /// Instantiates the graph (`cuGraphInstantiate`) as an [`UpdatableExec`], which keeps the
    /// graph, so that the [`NodeId`]s of its nodes stay valid for the executable's life.
    pub fn instantiate_updatable(self) -> Result<UpdatableExec, Error> {
        self.instantiate_updatable_with(Instantiate::new())
    }

    /// [`instantiate_updatable`](Self::instantiate_updatable) with CUDA's instantiation flags,
    /// as [`Graph::instantiate_with`] takes them.
    pub fn instantiate_updatable_with(self, how: Instantiate<'_>) -> Result<UpdatableExec, Error> {
        callback::enter("Graph::instantiate_updatable")?;
        let store = Arc::new(Store::new());
        let exec = hold_in(&self, &store, how)?;
        Ok(UpdatableExec {
            exec,
            graph: self,
            store,
            generation: 0,
            launched_at: Cell::new(0),
        })
    }
}

impl UpdatableExec {
    /// Launches the executable on `stream` (`cuGraphLaunch`).
    ///
    /// A stream that is capturing a graph is refused ([`Error::CapturedUpdatableLaunch`]): the
    /// store frees a replaced closure once the launches made before the update are done, which
    /// holds only for launches made here, one after another, not for a launch recorded into
    /// another graph and replayed whenever that graph runs. (`GraphExec::launch` may be
    /// captured: its closures are owned by user objects, which CUDA keeps for captured launches.)
    pub fn launch(&self, stream: &Stream) -> Result<(), Error> {
        match stream.capture_status()? {
            crate::CaptureStatus::None => {}
            crate::CaptureStatus::Active => return Err(Error::CapturedUpdatableLaunch),
            crate::CaptureStatus::Invalidated => return Err(Error::CaptureInvalidated),
        }
        // Before the launch: from here on the current closures count as seen by a launch.
        self.launched_at.set(self.generation);
        self.exec.launch(stream)
    }

    /// Launches the executable on `stream`, as [`launch`](Self::launch), and returns the
    /// [`Completion`](crate::Completion) of that launch, as [`Stream::completion`] would right
    /// after.
    pub fn launch_completion(&self, stream: &Stream) -> Result<crate::Completion, Error> {
        self.launch(stream)?;
        stream.completion()
    }

    /// Makes the host node `node` call `f` from the next launch on
    /// (`cuGraphExecHostNodeSetParams`); launches already made keep calling the closure they
    /// were made with. The closure it replaces goes as the type documentation says.
    ///
    /// [`Error::ForeignExecNode`] if `node` is not a node of this executable's graph (dropping
    /// `f` uncalled); a node that is not a host node is refused by CUDA.
    pub fn set_host_node<F>(&mut self, node: NodeId, f: F) -> Result<(), Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.set(
            "UpdatableExec::set_host_node",
            node,
            f,
            |exec, node, call, data| {
                let params = sys::CUDA_HOST_NODE_PARAMS {
                    fn_: Some(call),
                    userData: data,
                };
                // SAFETY: valid executable, a node of its graph, valid parameters; the store keeps
                // `call(data)` sound for every launch that can call it.
                unsafe { sys::cuGraphExecHostNodeSetParams(exec, node, &params) }
            },
        )
    }

    /// As [`set_host_node`](Self::set_host_node), with a sync mode (`cuGraphExecNodeSetParams`
    /// with `CUDA_HOST_NODE_PARAMS_v2`); [`Error::SyncModeUnavailable`] where the installed
    /// driver takes none.
    pub fn set_host_node_with_sync_mode<F>(
        &mut self,
        node: NodeId,
        mode: HostSyncMode,
        f: F,
    ) -> Result<(), Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        let operation = "UpdatableExec::set_host_node_with_sync_mode";
        callback::enter(operation)?;
        sync_mode::check(mode)?;
        self.set(operation, node, f, |exec, node, call, data| {
            // SAFETY: as in `set_host_node`.
            unsafe { host_v2::exec_set(exec, node, call, data, mode.raw()) }
        })
    }

    fn set<F>(
        &mut self,
        operation: &'static str,
        node: NodeId,
        f: F,
        write: impl FnOnce(
            sys::CUgraphExec,
            sys::CUgraphNode,
            HostFn,
            *mut c_void,
        ) -> Result<(), cuda_hostcb::Error>,
    ) -> Result<(), Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        callback::enter(operation)?;
        if node.graph != self.graph.as_raw() {
            return Err(Error::ForeignExecNode);
        }
        let generation = self.generation + 1;
        let (call, data, held) = version(StorePtr(Arc::as_ptr(&self.store)), generation, f);
        let _current = push(self.exec.context())?;
        // If CUDA refuses, `held` drops the closure here: no launch can call it.
        write(self.exec.as_raw(), node.raw, call, data)?;
        self.generation = generation;
        let unseen = self
            .store
            .install(node.raw as usize, held, self.launched_at.get());
        drop(unseen);
        Ok(())
    }

    /// How many closures set through [`set_host_node`](Self::set_host_node) the store holds now
    /// (each node's current one and the replaced ones a launch may still call).
    pub fn held_closures(&self) -> usize {
        self.store.held()
    }

    /// The most closures the store has held at once.
    pub fn most_held_closures(&self) -> usize {
        self.store.most()
    }

    /// The raw executable; valid while `self` lives. Launch it only through
    /// [`launch`](Self::launch) (see the type documentation).
    pub fn as_raw(&self) -> sys::CUgraphExec {
        self.exec.as_raw()
    }

    /// The context the executable was instantiated in.
    pub fn context(&self) -> Option<&Context> {
        self.exec.context()
    }
}

#[cfg(test)]
mod tests {
    //! The store's bookkeeping without a GPU: closures are called by hand, as CUDA would.

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Tally(Arc<AtomicUsize>);

    impl Drop for Tally {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A closure for `generation` that counts its calls and drops; returns its host function
    /// and data, and what the store holds.
    fn counted(
        store: &Arc<Store>,
        generation: u64,
        calls: &Arc<AtomicUsize>,
        drops: &Arc<AtomicUsize>,
    ) -> (HostFn, *mut c_void, Held) {
        let (c, tally) = (Arc::clone(calls), Tally(Arc::clone(drops)));
        version(StorePtr(Arc::as_ptr(store)), generation, move || {
            let _keep = &tally;
            c.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn a_closure_no_launch_saw_is_dropped_at_its_replacement() {
        let store = Arc::new(Store::new());
        let (calls, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for generation in 1..=100 {
            let (_, _, held) = counted(&store, generation, &calls, &drops);
            drop(store.install(7, held, 0));
        }
        assert_eq!(drops.load(Ordering::SeqCst), 99);
        assert_eq!(store.held(), 1);
    }

    #[test]
    fn executables_move_between_threads_and_node_ids_are_shared() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<UpdatableExec>();
        send::<NodeId>();
        sync::<NodeId>();
        send::<crate::Completion>();
        sync::<crate::Completion>();
        send::<crate::BorrowedGraph>();
    }

    #[test]
    fn a_closure_a_launch_saw_is_kept_at_its_replacement() {
        let store = Arc::new(Store::new());
        let (calls, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (_, _, held) = counted(&store, 1, &calls, &drops);
        assert!(store.install(1, held, 0).is_none());
        // A launch was made at generation 1, while the closure was current: it must stay.
        let (_, _, held) = counted(&store, 2, &calls, &drops);
        assert!(store.install(1, held, 1).is_none());
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(store.held(), 2);
    }

    #[test]
    fn a_replaced_closure_goes_when_a_later_launch_calls_the_store() {
        let store = Arc::new(Store::new());
        let (calls, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        // Node A at generation 1, launched; B (another node) at 2, launched; A again at 3.
        let (call_a1, data_a1, held) = counted(&store, 1, &calls, &drops);
        assert!(store.install(1, held, 0).is_none());
        let (call_b2, data_b2, held) = counted(&store, 2, &calls, &drops);
        assert!(store.install(2, held, 1).is_none());
        let (call_a3, data_a3, held) = counted(&store, 3, &calls, &drops);
        assert!(
            store.install(1, held, 2).is_none(),
            "A1 was launched: retired"
        );
        assert_eq!(store.held(), 3);
        // The launch made at generation 2 runs A1 and B2: neither proves A1's launches are done.
        unsafe { call_a1(data_a1) };
        unsafe { call_b2(data_b2) };
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        // A launch made at generation 3 runs A3: every launch that could call A1 has finished.
        unsafe { call_a3(data_a3) };
        crate::wait_for_drops().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "A1, by the reaper");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(store.held(), 2);
        assert_eq!(store.most(), 3);
        drop(store);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            3,
            "the rest go with the store"
        );
    }

    #[test]
    fn a_panicking_closure_still_frees_what_its_call_proves_unused() {
        let _guard = crate::panic::tests::HOOK_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let seen = crate::panic::tests::recording_hook();
        let store = Arc::new(Store::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let (_, _, held) = counted(&store, 1, &Arc::new(AtomicUsize::new(0)), &drops);
        store.install(1, held, 0);
        let (call, data, held) = version(StorePtr(Arc::as_ptr(&store)), 2, || panic!("set 2"));
        assert!(store.install(1, held, 1).is_none());
        unsafe { call(data) };
        crate::wait_for_drops().unwrap();
        crate::panic::take_panic_hook();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(
            seen.lock().unwrap().clone(),
            vec![(PanicStage::Call, Some("set 2".to_owned()))]
        );
    }
}
