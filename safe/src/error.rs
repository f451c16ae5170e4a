//! The safe layer's error: a failed CUDA call (with the CUDA error's name and text), or a use
//! that the safe layer refuses because it could not be made sound; and the host sync modes,
//! with why one can be unavailable, which its message names. A leaf: it imports no other module
//! of the crate.

use std::fmt;

/// What went wrong in a call through the safe layer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA call failed, or the installed CUDA lacks the function or the library; the inner
    /// error names the function, the CUDA error's name, code and description.
    Cuda(cuda_hostcb::Error),

    /// `Stream::launch` was given a one-shot closure for a stream that
    /// is capturing a graph, whose every launch would call it again.
    CapturingStream,

    /// The stream's capture sequence was invalidated by an earlier failure.
    CaptureInvalidated,

    /// `Stream::keep_in_capture` was called on a stream that is not capturing a graph.
    NotCapturing,

    /// `UpdatableExec::launch` was given a stream that is capturing a graph: the captured launch
    /// would run whenever that graph runs, outside the order of launches and updates on which
    /// the executable's store decides when a replaced closure may go.
    CapturedUpdatableLaunch,

    /// A call of this crate was made inside a host callback (or a user-object destructor),
    /// where CUDA does not permit CUDA calls.
    InCallback {
        /// The refused call, e.g. `Stream::launch`.
        operation: &'static str,
    },

    /// A dependency passed to a graph belongs to another graph.
    ForeignNode,

    /// There is no device with this ordinal.
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices `cuDeviceGetCount` reports.
        count: usize,
    },

    /// `cuGraphExecUpdate` refused the update.
    UpdateRejected {
        /// The `CUgraphExecUpdateResult` name, e.g. `CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`.
        reason: &'static str,
        /// The failed call.
        source: cuda_hostcb::Error,
    },

    /// A host sync mode was asked for where the installed driver (or the bindings the layer is
    /// compiled over) cannot take one; the closure was dropped uncalled.
    SyncModeUnavailable {
        /// The mode asked for.
        mode: crate::HostSyncMode,
        /// What is missing: a new enough driver, or the declarations in the headers.
        missing: crate::SyncModeMissing,
    },

    /// A `NodeId` passed to an `UpdatableExec` names a node of another graph than
    /// the one it was instantiated from.
    ForeignExecNode,

    /// The work before a stream's completion will never be done: the context hit an error that
    /// ends it (a kernel that trapped; `Stream::synchronize` reports which).
    CompletionAbandoned,

    /// CUDA skipped one-shot closures of this stream (`Stream::launch`, `Stream::launch_fn`
    /// outside a capture): the context hit an error (a kernel that trapped,
    /// an illegal address), after which CUDA calls no host function; it made each closure's
    /// callback with that error instead, and the closure was dropped uncalled (on the reaper
    /// thread). The context cannot be used again.
    HostFunctionsSkipped {
        /// How many closures were dropped uncalled since the stream last reported.
        skipped: u32,
        /// The `CUresult` CUDA passed to the first skipped callback, e.g. 719
        /// (`CUDA_ERROR_LAUNCH_FAILED`).
        status: u32,
        /// The failed synchronisation (or, had it succeeded, the callbacks' status).
        source: cuda_hostcb::Error,
    },

    /// A call that waits for the reaper thread was made inside a `Drop` that the reaper runs,
    /// where it could only wait for itself.
    OnReaperThread {
        /// The refused call, e.g. `wait_for_drops`.
        operation: &'static str,
    },
}

// Written out rather than derived, so that the crate users build pulls in no proc-macro stack.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cuda(e) => e.fmt(f),
            Error::CapturingStream => f.write_str(
                "Stream::launch takes a one-shot (FnOnce) closure, but the stream is capturing a \
                 graph that calls its host functions on every launch; use Stream::launch_fn with \
                 an Fn + Send + Sync closure",
            ),
            Error::CapturedUpdatableLaunch => f.write_str(
                "UpdatableExec::launch was given a stream that is capturing a graph, which would \
                 replay the launch later, past the updates that free its closures; launch it on a \
                 stream that is not capturing, or capture the launches of a GraphExec",
            ),
            Error::NotCapturing => f.write_str(
                "Stream::keep_in_capture was called on a stream that is not capturing a graph; \
                 call it between begin_capture and end_capture, or keep the value with Graph::keep",
            ),
            Error::CaptureInvalidated => f.write_str(
                "the stream's capture was invalidated by an earlier failed call; end the capture, \
                 discard its graph and begin again",
            ),
            Error::InCallback { operation } => write!(
                f,
                "{operation} was called inside a host callback, where CUDA calls are not \
                 permitted; enqueue the work from an ordinary thread instead (e.g. after \
                 synchronising)"
            ),
            Error::ForeignNode => f.write_str(
                "a dependency node belongs to another graph; pass only nodes that this graph's \
                 add_* methods returned",
            ),
            Error::NoSuchDevice { ordinal, count } => write!(
                f,
                "there is no CUDA device {ordinal}: the driver reports {count} device(s); pass an \
                 ordinal below {count}"
            ),
            Error::UpdateRejected { reason, source } => write!(
                f,
                "the executable graph cannot be updated from this graph ({reason}); instantiate \
                 the graph anew instead: {source}"
            ),
            Error::SyncModeUnavailable { mode, missing } => {
                f.write_str(&unavailable(*mode, missing))
            }
            Error::ForeignExecNode => f.write_str(
                "the node belongs to another graph than the one this executable was instantiated \
                 from; pass a NodeId of a node of that graph",
            ),
            Error::CompletionAbandoned => f.write_str(
                "the work before the stream's completion will never be done: the context hit an \
                 error that ends it; synchronize the stream to see the error",
            ),
            Error::HostFunctionsSkipped {
                skipped,
                status,
                source,
            } => {
                let status = cuda_hostcb::Error::Cuda {
                    api: cuda_hostcb::error::Api::Driver,
                    function: "",
                    code: *status,
                };
                let name = status.name().unwrap_or("an error");
                write!(
                    f,
                    "{skipped} host function(s) of this stream were not called: the context hit an \
                     error, so CUDA made their callbacks with {name} ({}) instead of running them, \
                     and each closure was dropped uncalled; the context cannot be used again \
                     (find the failed kernel or copy before them; recreate the context, or \
                     restart the process): {source}",
                    status.code().unwrap_or_default()
                )
            }
            Error::OnReaperThread { operation } => write!(
                f,
                "{operation} was called inside a Drop that the safe layer's reaper thread runs, \
                 where it could only wait for itself; call it from another thread"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the CUDA error's own source, as its message is this one's.
            Error::Cuda(e) => std::error::Error::source(e),
            Error::UpdateRejected { source, .. } | Error::HostFunctionsSkipped { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}

impl From<cuda_hostcb::Error> for Error {
    fn from(error: cuda_hostcb::Error) -> Self {
        Error::Cuda(error)
    }
}

impl Error {
    /// Whether this is a failed CUDA call whose status is `code`, by name, as
    /// [`cuda_hostcb::Error::is`] tells it (`err.is(CUresult::CUDA_ERROR_NOT_READY)` with any
    /// target's `CUresult`); every other error is none.
    pub fn is<C: cuda_hostcb::error::Code>(&self, code: C) -> bool {
        match self {
            Error::Cuda(e) => e.is(code),
            Error::UpdateRejected { source, .. } => source.is(code),
            Error::HostFunctionsSkipped { source, .. } => source.is(code),
            _ => false,
        }
    }

    /// The `CUresult` value of a failed CUDA call, `None` for every other error.
    pub fn code(&self) -> Option<u32> {
        // One arm per variant: the inner errors lie at different offsets, and a shared arm
        // would select between their addresses, which keeps the optimiser from following a
        // code through (a caller that only wants the code then gets the raw call).
        match self {
            Error::Cuda(e) => e.code(),
            Error::UpdateRejected { source, .. } => source.code(),
            Error::HostFunctionsSkipped { source, .. } => source.code(),
            _ => None,
        }
    }
}

// ---- host sync modes, and why one is unavailable ------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_errors_keep_the_name_and_text() {
        let inner = cuda_hostcb::Error::Cuda {
            api: cuda_hostcb::error::Api::Driver,
            function: "cuLaunchHostFunc",
            code: 400,
        };
        let e = Error::from(inner);
        // The inner error's display, with the code's name and description from the driver
        // (or, with no driver loaded, the phrases that say so).
        assert_eq!(e.to_string(), inner.to_string());
        assert!(
            e.to_string().starts_with("cuLaunchHostFunc failed with "),
            "{e}"
        );
        assert!(e.to_string().contains(" (400): "), "{e}");
        assert_eq!(e.code(), Some(400));
    }

    #[test]
    fn refusals_say_what_to_do() {
        assert!(
            Error::CapturingStream
                .to_string()
                .contains("use Stream::launch_fn")
        );
        assert!(
            Error::CapturedUpdatableLaunch
                .to_string()
                .contains("launch it on a stream that is not capturing")
        );
        let e = Error::InCallback {
            operation: "Stream::synchronize",
        };
        assert!(
            e.to_string()
                .starts_with("Stream::synchronize was called inside")
        );
        assert_eq!(e.code(), None);
        assert_eq!(
            Error::NoSuchDevice {
                ordinal: 2,
                count: 1
            }
            .to_string(),
            "there is no CUDA device 2: the driver reports 1 device(s); pass an ordinal below 1"
        );
    }
}

#[cfg(test)]
mod sync_mode_tests {
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
