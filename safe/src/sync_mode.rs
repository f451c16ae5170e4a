//! Host sync modes: how the CUDA thread that runs host functions waits for the next one
//! (`CUhostTaskSyncMode`, taken by `cuLaunchHostFunc_v2` and by a host node's
//! `CUDA_HOST_NODE_PARAMS_v2`); closures with one, on a stream and as graph host nodes; and why
//! a mode can be unavailable: the installed driver, asked at run time (`cuDriverGetVersion`),
//! is older than CUDA 13.2, the first whose headers declare `cuLaunchHostFunc_v2`. (Or the bindings the layer is compiled over lack the declarations,
//! where the newest target listed predates CTK 13.2: no target this repository lists.)

use std::fmt;
use std::sync::OnceLock;

use crate::callback::{self, Guarded, Shared};
use crate::graph::attach;
use crate::{CaptureStatus, Error, Graph, GraphNode, Stream, host_v2, sys};

/// How the CUDA thread that runs a host function waits for host work (`CUhostTaskSyncMode`).
///
/// Only a driver of CUDA 13.2 or newer takes a sync mode (`cuLaunchHostFunc_v2`, a host node's
/// `syncMode`); the safe layer asks the installed driver's version when a mode is first passed.
/// With an older driver the calls that take one return [`Error::SyncModeUnavailable`](crate::Error::SyncModeUnavailable)
/// and drop the closure uncalled; the fallback is the caller's to choose: the calls without a
/// sync mode (`Stream::launch`, `Graph::add_host_node`) behave as [`Blocking`](Self::Blocking).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HostSyncMode {
    /// The thread blocks until host work is ready (`CU_HOST_TASK_BLOCKING`, CUDA's default).
    #[default]
    Blocking,
    /// The thread spins until host work is ready (`CU_HOST_TASK_SPINWAIT`): lower latency, one
    /// CPU core busy while it waits.
    SpinWait,
}

impl HostSyncMode {
    /// The `CUhostTaskSyncMode` value.
    pub(crate) const fn raw(self) -> u32 {
        match self {
            HostSyncMode::Blocking => 0,
            HostSyncMode::SpinWait => 1,
        }
    }
}

/// The first CUDA version whose driver can be shown to take a sync mode: the first whose
/// `cudaTypedefs.h` declares `cuLaunchHostFunc_v2` (`PFN_cuLaunchHostFunc_v13010`, in 13.2's
/// header first). Its ABI number says 13.1, but a 13.1 driver asked for that ABI hands back the
/// three-argument function, which drops the mode; and a host node's `syncMode` is declared from
/// the same headers on. The raw `cuLaunchHostFunc_v2` refuses the same drivers.
pub const SYNC_MODE_DRIVER_VERSION: u32 = 13020;

/// What is missing for a sync mode (see [`Error::SyncModeUnavailable`](crate::Error::SyncModeUnavailable)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SyncModeMissing {
    /// The headers of the bindings the safe layer is compiled over (the newest target's) declare
    /// neither `cuLaunchHostFunc_v2` nor a `syncMode` in `CUDA_HOST_NODE_PARAMS_v2`: a target
    /// list whose newest target predates CTK 13.2.
    Target {
        /// The CTK version of those headers, e.g. `"12.9"`.
        headers: &'static str,
    },
    /// The installed driver is older than [`SYNC_MODE_DRIVER_VERSION`].
    Driver {
        /// `cuDriverGetVersion`, e.g. 13000.
        found: u32,
    },
}

/// A CUDA version number (`13010`) as `13.1`.
pub(crate) struct Version(pub(crate) u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0 / 1000, (self.0 % 1000) / 10)
    }
}

/// The message of [`Error::SyncModeUnavailable`](crate::Error::SyncModeUnavailable).
pub(crate) fn unavailable(mode: HostSyncMode, missing: &SyncModeMissing) -> String {
    let needs = Version(SYNC_MODE_DRIVER_VERSION);
    let why = match missing {
        SyncModeMissing::Target { headers } => format!(
            "the safe layer was built over the CTK {headers} headers, which do not declare \
             cuLaunchHostFunc_v2; build it over a target of CTK 13.2 or newer"
        ),
        SyncModeMissing::Driver { found } => format!(
            "the installed driver is CUDA {}; install an NVIDIA driver for CUDA {needs} or newer",
            Version(*found)
        ),
    };
    format!(
        "HostSyncMode::{mode:?} needs cuLaunchHostFunc_v2 or a host node with a sync mode, from a \
         CUDA {needs} driver: {why}, or fall back to the calls without a sync mode \
         (Stream::launch, Graph::add_host_node), which block"
    )
}

/// The `cuStreamAddCallback` callback that guards a sync-mode closure (see
/// `callback::guard_call`).
///
/// # Safety
/// `data` is a [`Guarded`] cell for `F`, handed over after its host function was enqueued on the
/// stream; CUDA calls this once.
unsafe extern "C" fn on_guard<F: FnMut() + Send + 'static>(
    _: sys::CUstream,
    status: sys::CUresult,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: the caller's contract.
    unsafe { callback::guard_call::<F>(status.0, data) }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_cuda_h() {
        // `CU_HOST_TASK_BLOCKING = 0x0`, `CU_HOST_TASK_SPINWAIT = 0x1` (cuda.h, CTK 13.2 on).
        assert_eq!(HostSyncMode::Blocking.raw(), 0);
        assert_eq!(HostSyncMode::SpinWait.raw(), 1);
        assert_eq!(HostSyncMode::default(), HostSyncMode::Blocking);
    }

    #[test]
    fn the_message_names_the_version_needed_and_the_fallback() {
        let old = unavailable(
            HostSyncMode::SpinWait,
            &SyncModeMissing::Driver { found: 13000 },
        );
        assert!(old.starts_with("HostSyncMode::SpinWait needs cuLaunchHostFunc_v2"));
        assert!(old.contains("from a CUDA 13.2 driver"), "{old}");
        assert!(old.contains("the installed driver is CUDA 13.0"), "{old}");
        assert!(
            old.contains("fall back to the calls without a sync mode"),
            "{old}"
        );
        let target = unavailable(
            HostSyncMode::Blocking,
            &SyncModeMissing::Target { headers: "12.9" },
        );
        assert!(
            target.contains("CTK 12.9 headers, which do not"),
            "{target}"
        );
    }
}
