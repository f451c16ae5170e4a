//! Host functions and host nodes with a sync mode: `cuLaunchHostFunc_v2`, and
//! `CUDA_HOST_NODE_PARAMS_v2` (with its `syncMode`) inside a `CUgraphNodeParams` for
//! `cuGraphAddNode` and `cuGraphExecNodeSetParams`, for bindings whose headers declare them
//! (capability `host_func_v2`; else `host_v1.rs` is compiled under this name). Reached only once
//! `sync_mode::check` has found a driver that takes sync modes.

use std::alloc::{Layout, alloc_zeroed, handle_alloc_error};
use std::ffi::c_void;
use std::ptr::{self, addr_of_mut};

use crate::callback::HostFn;

/// These bindings can pass a sync mode.
pub(crate) const SUPPORTED: bool = true;

// The safe enum mirrors the bindings' values.
const _: () = {
    use sys::CUhostTaskSyncMode as M;
    assert!(crate::HostSyncMode::Blocking.raw() == M::CU_HOST_TASK_BLOCKING.0);
    assert!(crate::HostSyncMode::SpinWait.raw() == M::CU_HOST_TASK_SPINWAIT.0);
};
use crate::sys;

/// `cuLaunchHostFunc_v2(stream, call, data, mode)`.
///
/// # Safety
/// As `cuLaunchHostFunc`: `call(data)` is sound when the stream makes the call.
pub(super) unsafe fn launch(
    stream: sys::CUstream,
    call: HostFn,
    data: *mut c_void,
    mode: u32,
) -> Result<(), cuda_hostcb::Error> {
    // SAFETY: the caller's contract.
    unsafe { sys::cuLaunchHostFunc_v2(stream, Some(call), data, mode) }
}

/// The parameters of a host node with a sync mode: a zeroed `CUgraphNodeParams` (CUDA wants
/// every unused byte zero, padding included) in which only the node type and the host
/// parameters' `fn`, `userData` and `syncMode` are written, each in place. Whatever else the
/// bindings' `CUDA_HOST_NODE_PARAMS_v2` holds (from CTK 13.4 a context union: zero means none)
/// stays zero. The box keeps the bytes where they were written: the value is never moved, so
/// no copy can leave its padding undefined.
pub(super) fn params(call: HostFn, data: *mut c_void, mode: u32) -> Box<sys::CUgraphNodeParams> {
    let layout = Layout::new::<sys::CUgraphNodeParams>();
    // SAFETY: the layout of a non-zero-sized type.
    let p = unsafe { alloc_zeroed(layout) }.cast::<sys::CUgraphNodeParams>();
    if p.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `p` points to zeroed, writable memory for one `CUgraphNodeParams`, allocated as a
    // `Box` would be; each write goes through a raw pointer to its field, so no other byte is
    // touched. All-zero bytes are a valid `CUgraphNodeParams` (integers, pointers, `None`
    // function pointers and unions of them).
    unsafe {
        addr_of_mut!((*p).type_).write(sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_HOST);
        let host = addr_of_mut!((*p).anon.host);
        addr_of_mut!((*host).fn_).write(Some(call));
        addr_of_mut!((*host).userData).write(data);
        addr_of_mut!((*host).syncMode).write(mode);
        Box::from_raw(p)
    }
}

/// Adds a host node with a sync mode (`cuGraphAddNode_v2`, what `cuda.h`'s `cuGraphAddNode` names
/// from CTK 12.3 on; no edge data).
///
/// # Safety
/// `graph` and `deps` are valid; `call(data)` is sound on every launch of the graph and of
/// whatever is made from it.
pub(super) unsafe fn add_node(
    graph: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    call: HostFn,
    data: *mut c_void,
    mode: u32,
) -> Result<sys::CUgraphNode, cuda_hostcb::Error> {
    let mut node_params = params(call, data, mode);
    let deps_ptr = if deps.is_empty() {
        ptr::null()
    } else {
        deps.as_ptr()
    };
    let mut node: sys::CUgraphNode = ptr::null_mut();
    // SAFETY: valid graph, nodes, parameters and out-pointer; no edge data.
    unsafe {
        sys::cuGraphAddNode_v2(
            &mut node,
            graph,
            deps_ptr,
            ptr::null(),
            deps.len(),
            &mut *node_params,
        )?
    };
    Ok(node)
}

/// Sets a host node of an executable to `call(data)` with a sync mode
/// (`cuGraphExecNodeSetParams`).
///
/// # Safety
/// `node` is a host node of the graph `exec` was instantiated from; `call(data)` is sound on
/// every later launch of `exec`.
pub(super) unsafe fn exec_set(
    exec: sys::CUgraphExec,
    node: sys::CUgraphNode,
    call: HostFn,
    data: *mut c_void,
    mode: u32,
) -> Result<(), cuda_hostcb::Error> {
    let mut node_params = params(call, data, mode);
    // SAFETY: the caller's contract; valid parameters.
    unsafe { sys::cuGraphExecNodeSetParams(exec, node, &mut *node_params) }
}

#[cfg(test)]
mod tests {
    //! The bytes this module hands CUDA, against the C declarations of `cuda.h`:
    //! `CUgraphNodeParams { CUgraphNodeType type; int reserved0[3]; union { ...;
    //! CUDA_HOST_NODE_PARAMS_v2 host; ...; char asBytes[232]; }; long long reserved2; }` (256 B),
    //! `CUDA_HOST_NODE_PARAMS_v2 { CUhostFn fn; void *userData; unsigned int syncMode; ... }`.

    use super::*;
    use std::mem::{offset_of, size_of};

    unsafe extern "C" fn marker(_: *mut c_void) {}

    /// The offsets this module relies on, computed from the C declarations on a 64-bit target.
    const HOST_AT: usize = 16; // after `type` (4 B) and `reserved0` (12 B); the union is 8-aligned
    const FN_AT: usize = 0;
    const USER_DATA_AT: usize = 8;
    const SYNC_MODE_AT: usize = 16;
    const NODE_PARAMS_SIZE: usize = 256;

    #[test]
    fn the_fields_written_sit_where_cuda_h_puts_them() {
        type P = sys::CUgraphNodeParams;
        type H = sys::CUDA_HOST_NODE_PARAMS_v2;
        assert_eq!(size_of::<P>(), NODE_PARAMS_SIZE);
        assert_eq!(offset_of!(P, anon), HOST_AT);
        assert_eq!(offset_of!(H, fn_), FN_AT);
        assert_eq!(offset_of!(H, userData), USER_DATA_AT);
        assert_eq!(offset_of!(H, syncMode), SYNC_MODE_AT);
        // 24 B (13.2-13.3) or 32 B with the context union (13.4 on); whichever, it fits.
        assert!(size_of::<H>() >= SYNC_MODE_AT + 4 && HOST_AT + size_of::<H>() <= 248);
        println!(
            "layout: {}: CUgraphNodeParams {} B, type at 0, host at {}; CUDA_HOST_NODE_PARAMS_v2 {} B: \
             fn at {}, userData at {}, syncMode at {} (4 B), bytes {}..{} zero",
            crate::CTK,
            size_of::<P>(),
            offset_of!(P, anon),
            size_of::<H>(),
            offset_of!(H, fn_),
            offset_of!(H, userData),
            offset_of!(H, syncMode),
            SYNC_MODE_AT + 4,
            size_of::<H>()
        );
    }

    #[test]
    fn only_the_type_function_data_and_mode_are_nonzero() {
        let data = 0x1122_3344_5566_7788_usize as *mut c_void;
        for mode in [0u32, 1] {
            let params = params(marker, data, mode);
            // SAFETY: the whole value was zeroed before the writes; viewing it as bytes reads
            // initialised memory.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    ptr::from_ref(&*params).cast::<u8>(),
                    size_of::<sys::CUgraphNodeParams>(),
                )
            };
            let mut want = vec![0u8; NODE_PARAMS_SIZE];
            let host = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_HOST.0;
            want[0..4].copy_from_slice(&host.to_ne_bytes());
            let f = (marker as HostFn) as usize;
            want[HOST_AT + FN_AT..][..8].copy_from_slice(&f.to_ne_bytes());
            want[HOST_AT + USER_DATA_AT..][..8].copy_from_slice(&(data as usize).to_ne_bytes());
            want[HOST_AT + SYNC_MODE_AT..][..4].copy_from_slice(&mode.to_ne_bytes());
            assert_eq!(bytes, &want[..], "mode {mode}");
        }
    }
}
