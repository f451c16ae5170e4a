//! Host sync modes: how the CUDA thread that runs host functions waits for the next one
//! (`CUhostTaskSyncMode`, taken by `cuLaunchHostFunc_v2` and by a host node's
//! `CUDA_HOST_NODE_PARAMS_v2`); closures with one, on a stream and as graph host nodes; and why
//! a mode can be unavailable: the installed driver, asked at run time (`cuDriverGetVersion`),
//! is older than CUDA 13.2, the first whose headers declare `cuLaunchHostFunc_v2`. (Or the bindings the layer is compiled over lack the declarations,
//! where the newest target listed predates CTK 13.2: no target this repository lists.)

use std::sync::OnceLock;

use crate::callback;
use crate::error::{HostSyncMode, SYNC_MODE_DRIVER_VERSION, SyncModeMissing};
use crate::graph::attach;
use crate::guarded::{Guarded, on_guard};
use crate::shared::Shared;
use crate::{CaptureStatus, Error, Graph, GraphNode, Stream, host_v2, sys};

/// The installed driver's version (`cuDriverGetVersion`), asked once.
fn driver_version() -> Result<u32, Error> {
    static VERSION: OnceLock<u32> = OnceLock::new();
    if let Some(v) = VERSION.get() {
        return Ok(*v);
    }
    let mut raw = 0;
    // SAFETY: a valid out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut raw)? };
    let v = u32::try_from(raw).unwrap_or(0);
    Ok(*VERSION.get_or_init(|| v))
}

/// `Ok` if `mode` can be passed here: the bindings declare sync modes and the installed driver
/// takes them.
pub(crate) fn check(mode: HostSyncMode) -> Result<(), Error> {
    let missing = if !host_v2::SUPPORTED {
        SyncModeMissing::Target {
            headers: crate::CTK,
        }
    } else {
        match driver_version()? {
            found if found < SYNC_MODE_DRIVER_VERSION => SyncModeMissing::Driver { found },
            _ => return Ok(()),
        }
    };
    Err(Error::SyncModeUnavailable { mode, missing })
}

impl Stream {
    /// Enqueues a one-shot closure with a sync mode (`cuLaunchHostFunc_v2`): the stream calls it
    /// once, after the work before it, by reference, and the reaper thread drops it after that
    /// call, as with [`Stream::launch`].
    ///
    /// After a context error CUDA neither calls nor releases a `cuLaunchHostFunc_v2` function
    /// (and offers no stream callback with a sync mode), so each closure has a guard: a stream
    /// callback (`cuStreamAddCallback`, which CUDA makes either way, with the error after one)
    /// enqueued right after it, which hands the closure to the reaper once the stream has run
    /// or skipped it. As with [`Stream::launch`], a skipped closure is dropped uncalled exactly
    /// once, and the next [`Stream::synchronize`] reports it
    /// ([`Error::HostFunctionsSkipped`]). The guard is a second host callback per closure, made
    /// without a sync mode. Should CUDA accept the host function and then refuse its guard
    /// (never seen), the error is returned and the closure, which may still be called, is leaked.
    ///
    /// Refused, dropping `f` uncalled, with [`Error::SyncModeUnavailable`] where the installed
    /// driver is older than CUDA 13.2 (checked at run time); the fallback is yours to choose,
    /// e.g. [`Stream::launch`], which blocks:
    ///
    /// ```no_run
    /// # use cuda_hostcb_safe::{Error, HostSyncMode, Stream};
    /// # fn run(stream: &Stream) -> Result<(), Error> {
    /// match stream.launch_with_sync_mode(HostSyncMode::SpinWait, || println!("spun")) {
    ///     Err(Error::SyncModeUnavailable { .. }) => stream.launch(|| println!("blocked"))?,
    ///     other => other?,
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// A stream that is capturing a graph returns [`Error::CapturingStream`], as
    /// [`Stream::launch`] does; add a host node with
    /// [`Graph::add_host_node_with_sync_mode`] instead.
    pub fn launch_with_sync_mode<F>(&self, mode: HostSyncMode, f: F) -> Result<(), Error>
    where
        F: FnMut() + Send + 'static,
    {
        callback::enter("Stream::launch_with_sync_mode")?;
        let guarded = Guarded::new(self.book(), f);
        check(mode)?;
        match self.capture_status()? {
            CaptureStatus::None => {}
            CaptureStatus::Active => return Err(Error::CapturingStream),
            CaptureStatus::Invalidated => return Err(Error::CaptureInvalidated),
        }
        let (call, data) = guarded.parts();
        // SAFETY: `call` runs the closure by reference, at most once (a plain stream makes the
        // call once); the guard enqueued next releases the cell after it. If CUDA refuses,
        // `guarded` drops the closure here.
        unsafe { host_v2::launch(self.as_raw(), call, data, mode.raw())? };
        guarded.hand_over();
        // SAFETY: `data` is the cell just handed over, whose host function was enqueued on this
        // stream before this callback; CUDA makes the callback once, with success or the error.
        unsafe { sys::cuStreamAddCallback(self.as_raw(), Some(on_guard::<F>), data, 0)? };
        Ok(())
    }
}

impl Graph {
    /// Adds a host node with a sync mode that calls `f` on every launch, after `dependencies`
    /// (`cuGraphAddNode` with `CUDA_HOST_NODE_PARAMS_v2`; every unused byte zero).
    ///
    /// `f` is owned as with [`Graph::add_host_node`]. Refused, dropping `f` uncalled, with
    /// [`Error::SyncModeUnavailable`] where the installed driver is older than CUDA 13.2;
    /// [`Graph::add_host_node`] is the blocking fallback.
    pub fn add_host_node_with_sync_mode<F>(
        &self,
        dependencies: &[GraphNode<'_>],
        mode: HostSyncMode,
        f: F,
    ) -> Result<GraphNode<'_>, Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        callback::enter("Graph::add_host_node_with_sync_mode")?;
        let shared = Shared::new(f);
        check(mode)?;
        let deps = self.raw_dependencies(dependencies)?;
        let (call, data) = attach(self.as_raw(), shared)?;
        // SAFETY: the graph owns the closure through the user object `attach` moved into it; if
        // adding the node fails, the graph still owns it and drops it with itself.
        let raw = unsafe { host_v2::add_node(self.as_raw(), &deps, call, data, mode.raw())? };
        Ok(GraphNode::of(raw, self))
    }
}
