//! Host sync modes: how the CUDA thread that runs host functions waits for the next one
//! (`CUhostTaskSyncMode`, taken by `cuLaunchHostFunc_v2` and by a host node's
//! `CUDA_HOST_NODE_PARAMS_v2`), the same for every target, and why a mode can be unavailable.

use std::fmt;

/// How the CUDA thread that runs a host function waits for host work (`CUhostTaskSyncMode`).
///
/// Only a driver of CUDA 13.1 or newer takes a sync mode, through functions that only some
/// targets' headers declare (the `host_func_v2` capability of `cuda_hostcb::for_each_target!`).
/// Elsewhere the calls that take one return [`Error::SyncModeUnavailable`](crate::Error::SyncModeUnavailable)
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

/// The first CUDA version whose driver takes a sync mode: the ABI version of
/// `cuLaunchHostFunc_v2` in `cudaTypedefs.h` (`PFN_cuLaunchHostFunc_v13010`).
pub const SYNC_MODE_DRIVER_VERSION: u32 = 13010;

/// What is missing for a sync mode (see [`Error::SyncModeUnavailable`](crate::Error::SyncModeUnavailable)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SyncModeMissing {
    /// This target's headers declare neither `cuLaunchHostFunc_v2` nor a `syncMode` in
    /// `CUDA_HOST_NODE_PARAMS_v2`, so its bindings cannot pass one.
    Target {
        /// The CTK version of the target's headers, e.g. `"13.0"`.
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
            "this target's headers (CTK {headers}) do not declare cuLaunchHostFunc_v2; use a \
             target whose headers do (capability host_func_v2 of cuda_hostcb::for_each_target!)"
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
        assert!(old.contains("from a CUDA 13.1 driver"), "{old}");
        assert!(old.contains("the installed driver is CUDA 13.0"), "{old}");
        assert!(
            old.contains("fall back to the calls without a sync mode"),
            "{old}"
        );
        let target = unavailable(
            HostSyncMode::Blocking,
            &SyncModeMissing::Target { headers: "12.9" },
        );
        assert!(target.contains("(CTK 12.9) do not declare"), "{target}");
    }
}
