//! GPU tests of drops off CUDA's threads: 1,000 closures per path
//! (`Stream::launch`, host nodes of a graph, closures captured by `Stream::launch_fn`), each
//! owning 2 MiB of device memory that its `Drop` frees with `cuMemFree`. CUDA refuses CUDA
//! calls on its own threads (`CUDA_ERROR_NOT_PERMITTED`), so every free must run on a program
//! thread (the safe layer's reaper): every free returns success, the device's free memory
//! comes back (`cuMemGetInfo`), every count is exact, and nothing deadlocks (a watchdog ends
//! the process after 120 s).
//!
//! The `graph_keeps_*` trials (`kept.rs`) move a buffer that a kernel reads into the graph
//! (`Graph::keep`, `Stream::keep_in_capture`): freed once, on the reaper, after the executable.
//!
//! The `teardown_*` trials (`teardown.rs`) drop a handle inside a callback right before the
//! program's last context handle, for hundreds of rounds in a child process: the handle's
//! destruction must come before the context's release.
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` inverts every check, so each trial must fail at its
//! first one.

#[path = "../support/mod.rs"]
mod support;

mod cases;
mod kept;
mod teardown;

fn main() {
    if let Ok(kind) = std::env::var(teardown::CHILD_ENV) {
        teardown::child(&kind);
    }
    support::run(cases::probe(), cases::trials)
}
