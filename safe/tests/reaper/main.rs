//! GPU tests of drops off CUDA's threads, for every enabled target: 1,000 closures per path
//! (`Stream::launch`, host nodes of a graph, closures captured by `Stream::launch_fn`), each
//! owning 2 MiB of device memory that its `Drop` frees with `cuMemFree`. CUDA refuses CUDA
//! calls on its own threads (`CUDA_ERROR_NOT_PERMITTED`), so every free must run on a program
//! thread (the safe layer's reaper): every free returns success, the device's free memory
//! comes back (`cuMemGetInfo`), every count is exact, and nothing deadlocks (a watchdog ends
//! the process after 120 s).
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` inverts every check, so each trial must fail at its
//! first one.

#![cfg_attr(not(feature = "all-targets"), allow(unused))]

#[path = "../support/mod.rs"]
mod support;

macro_rules! reaper_target {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        #[path = "."]
        #[allow(clippy::duplicate_mod, reason = "every target runs the same cases")]
        mod $target {
            pub use cuda_hostcb_safe::$target as safe;
            pub use cuda_hostcb_safe::$target::sys;
            pub const TARGET: &str = stringify!($target);
            mod cases;
            pub use cases::{probe, trials};
        }
    };
}

cuda_hostcb::for_each_target!(reaper_target);

fn main() {
    let mut targets: Vec<support::Target> = Vec::new();
    macro_rules! add_target {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            targets.push(($target::TARGET, $target::probe(), $target::trials))
        };
    }
    cuda_hostcb::for_each_target!(add_target);
    support::run(targets)
}
