//! Regression tests that launch real CUDA graphs through the generated bindings, for every
//! target (12.9, 13.0, 13.5) and both APIs (driver, runtime).
//!
//! Each scenario (`scenarios`) is written once against the [`binding::Binding`] trait, which
//! one macro body implements for every target and API (`bindings`). The crate's one test
//! executable `gpu` (`gpu/main.rs`, harness `harness`) runs each scenario for each binding as a
//! trial named `<target>::<api>::<scenario>`, and checks every target's entry points in both
//! default-stream modes (`entries`) as trials named `<target>::entries::<mode>`. Without a
//! usable GPU every trial is skipped with its reason; with `REQUIRE_GPU=1` it fails instead.
//! `tests/README.md` maps the scenarios to trial names.

pub mod binding;
pub mod bindings;
pub mod check;
pub mod entries;
pub mod harness;
pub mod probe;
pub mod resources;
pub mod scenarios;
#[cfg(test)]
mod types;
