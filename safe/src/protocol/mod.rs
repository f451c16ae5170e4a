//! The concurrent protocols of the safe layer, each in a small module that takes its primitives
//! from `crate::sync` and leaves CUDA's part to its caller, so that `tests/loom` compiles this
//! folder whole and model-checks each one (`cargo xtask loom`): the reaper's hand-off
//! ([`backlog`]), the sticky-error book ([`book`]), deferred destructions ([`deferral`]), the
//! completion waiter's signal ([`signal`]) and an updatable executable's store ([`store`]).

pub(crate) mod backlog;
pub(crate) mod book;
pub(crate) mod deferral;
pub(crate) mod signal;
pub(crate) mod store;
