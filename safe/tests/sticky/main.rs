//! GPU tests of sticky errors, for every enabled target: a PTX kernel that executes `trap;`
//! poisons its context, so each trial runs it in a child process (this executable again, with
//! `HOSTCB_STICKY_CHILD=<target>`), which prints what it observed on one `OBSERVED` line; the
//! trial checks that line. Around the kernel: one-shot closures before it (called) and after it
//! (skipped), a completion future and a thread waiting on a closure after it, and a graph of
//! host nodes and a captured graph, launched before and after it. Every closure must be called
//! or dropped exactly once, every waiter must return, nothing may hang (a watchdog in the
//! child, a deadline in the parent), and the error must name what happened.
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` inverts every check, so each trial must fail at its
//! first one.

#![cfg_attr(not(feature = "all-targets"), allow(unused))]

#[path = "../support/mod.rs"]
mod support;

/// The variable that makes this executable the child of one target's trial.
pub const CHILD_ENV: &str = "HOSTCB_STICKY_CHILD";

macro_rules! sticky_target {
    ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
        #[path = "."]
        #[allow(clippy::duplicate_mod, reason = "every target runs the same cases")]
        mod $target {
            pub use cuda_hostcb_safe::$target as safe;
            pub use cuda_hostcb_safe::$target::sys;
            pub const TARGET: &str = stringify!($target);
            mod cases;
            pub use cases::{child, probe, trials};
        }
    };
}

cuda_hostcb::for_each_target!(sticky_target);

fn main() {
    if let Ok(which) = std::env::var(CHILD_ENV) {
        macro_rules! child_of {
            ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
                if which == $target::TARGET {
                    $target::child();
                }
            };
        }
        cuda_hostcb::for_each_target!(child_of);
        eprintln!("error: {CHILD_ENV}={which} names no target of this build");
        std::process::exit(2);
    }
    let mut targets: Vec<support::Target> = Vec::new();
    macro_rules! add_target {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            targets.push(($target::TARGET, $target::probe(), $target::trials))
        };
    }
    cuda_hostcb::for_each_target!(add_target);
    support::run(targets)
}
