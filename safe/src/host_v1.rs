//! For bindings whose headers declare no host sync modes (the newest target listed predates CTK
//! 13.2: no capability `host_func_v2`), compiled under `host_v2`'s name: the same functions,
//! which the safe layer never reaches, because it refuses a sync mode first ([`SUPPORTED`] is
//! false). Host nodes are then added and updated with the v1 `CUDA_HOST_NODE_PARAMS` only.

use std::ffi::c_void;

use crate::sys;
use crate::callback::HostFn;

/// These bindings cannot pass a sync mode.
pub(super) const SUPPORTED: bool = false;

/// What the refused calls would return, were they reached.
fn missing() -> cuda_hostcb::Error {
    cuda_hostcb::Error::Unavailable {
        api: cuda_hostcb::error::Api::Driver,
        function: "cuLaunchHostFunc_v2",
        needs: crate::SYNC_MODE_DRIVER_VERSION,
        found: None,
        library: "bindings whose headers declare no host sync modes",
    }
}

/// Refused: see the module documentation.
pub(super) unsafe fn launch(
    _: sys::CUstream,
    _: HostFn,
    _: *mut c_void,
    _: u32,
) -> Result<(), cuda_hostcb::Error> {
    Err(missing())
}

/// Refused: see the module documentation.
pub(super) unsafe fn add_node(
    _: sys::CUgraph,
    _: &[sys::CUgraphNode],
    _: HostFn,
    _: *mut c_void,
    _: u32,
) -> Result<sys::CUgraphNode, cuda_hostcb::Error> {
    Err(missing())
}

/// Refused: see the module documentation.
pub(super) unsafe fn exec_set(
    _: sys::CUgraphExec,
    _: sys::CUgraphNode,
    _: HostFn,
    _: *mut c_void,
    _: u32,
) -> Result<(), cuda_hostcb::Error> {
    Err(missing())
}

#[cfg(test)]
mod tests {
    //! The host-node struct these bindings fill (for `cuGraphAddHostNode` and
    //! `cuGraphExecHostNodeSetParams`): `CUDA_HOST_NODE_PARAMS { CUhostFn fn; void *userData; }`.

    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_v1_fields_sit_where_cuda_h_puts_them() {
        type H = sys::CUDA_HOST_NODE_PARAMS;
        assert_eq!(size_of::<H>(), 16);
        assert_eq!(offset_of!(H, fn_), 0);
        assert_eq!(offset_of!(H, userData), 8);
        const { assert!(!SUPPORTED) };
        println!(
            "layout: {}: no sync mode; CUDA_HOST_NODE_PARAMS {} B: fn at {}, userData at {} (no unused bytes)",
            crate::CTK,
            size_of::<H>(),
            offset_of!(H, fn_),
            offset_of!(H, userData)
        );
    }

    #[test]
    fn the_refused_calls_name_the_function_and_version() {
        unsafe extern "C" fn marker(_: *mut c_void) {}
        let e = unsafe { launch(std::ptr::null_mut(), marker, std::ptr::null_mut(), 1) };
        let e = e.unwrap_err();
        assert!(e.is_unavailable());
        assert!(e.to_string().starts_with("cuLaunchHostFunc_v2 is not available"), "{e}");
    }
}
