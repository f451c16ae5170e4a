//! The concurrent protocols of the safe layer and the loader, model-checked with loom.
//!
//! This crate compiles the protocol modules themselves (`#[path]`: the safe layer's
//! `safe/src/protocol/` folder whole, and `generated/src/load/slot.rs`; not copies) against its
//! own `sync` facade, which gives loom's locks, atomics and threads under the feature `loom` and the
//! standard library's otherwise;
//! it depends on neither crate, so the bindings of the CUDA targets are not built. Its tests
//! (`models.rs`) run each protocol's threads through every interleaving loom explores (`cargo
//! xtask loom`), or, without the feature `loom`, a few times on real threads as part of `cargo test`.
//!
//! | protocol | file | what the model checks |
//! | --- | --- | --- |
//! | the reaper's hand-off and overflow | `safe/src/protocol/backlog.rs` | every job run once, on the taker or (backlog full) where it was handed over; a wait returns only after every job handed over has run; no lost unpark |
//! | deferred destructions | `safe/src/protocol/deferral.rs` | every destruction deferred by a callback runs exactly once; one not taken by a racing call stays pending, and the next call runs it; no destruction of a handle runs after its context's release, and the program's last context handle leaves no release behind; once the last handle of a borrowed context is dropped, nothing of it runs (its owner may destroy it) |
//! | the sticky-error book | `safe/src/protocol/book.rs` | a synchronisation that has settled sees every skip of the callbacks, with the first status |
//! | the completion waiter | `safe/src/protocol/signal.rs` | no lost wake-up between a poll and the waiter's resolution, nor between a hand-over and the waiter's park; a dropped future is forgotten |
//! | the executable-update store | `safe/src/protocol/store.rs` | no closure is given up while a launch that may call it runs; a later launch gives up the replaced ones |
//! | the first-call stubs | `generated/src/load/slot.rs` | concurrent first calls on one entry point all reach the library's function, and see the library loaded |

// The protocol modules are compiled whole, for the models, which use only what they check.
#![allow(dead_code)]

mod sync;

// The safe layer's protocols: its `protocol` folder, whole.
#[path = "../../../safe/src/protocol/mod.rs"]
mod protocol;

// The loader's `slot.rs` takes its primitives from `super::sync`: here, the crate's.
#[path = "../../../generated/src/load/slot.rs"]
mod slot;

#[cfg(test)]
mod models;
