//! GPU tests of sticky errors: a PTX kernel that executes `trap;`
//! poisons its context, so each trial runs it in a child process (this executable again, with
//! `HOSTCB_STICKY_CHILD=1`), which prints what it observed on one `OBSERVED` line; the
//! trial checks that line. Around the kernel: one-shot closures before it (called) and after it
//! (skipped), a completion future and a thread waiting on a closure after it, and a graph of
//! host nodes and a captured graph, launched before and after it. Every closure must be called
//! or dropped exactly once, every waiter must return, nothing may hang (a watchdog in the
//! child, a deadline in the parent), and the error must name what happened.
//!
//! `HOSTCB_TESTS_WRONG_EXPECTATIONS=1` inverts every check, so each trial must fail at its
//! first one.

#[path = "../support/mod.rs"]
mod support;

/// The variable that makes this executable the child of the trial.
pub const CHILD_ENV: &str = "HOSTCB_STICKY_CHILD";

mod cases;

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        cases::child();
    }
    support::run(cases::probe(), cases::trials)
}
