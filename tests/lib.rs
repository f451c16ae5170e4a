//! Regression tests that launch real CUDA graphs through the generated bindings, for every
//! target (12.9, 13.0, 13.5) and both APIs (driver, runtime).
//!
//! Each scenario (`scenarios`) is written once against the [`binding::Binding`] trait, which
//! one macro per API implements for every target (`bindings`). The test executable `gpu`
//! (`gpu/main.rs`, harness `harness`) runs each scenario for each binding as a trial named
//! `<target>::<api>::<scenario>`. Without a usable GPU every trial is skipped with its reason;
//! with `REQUIRE_GPU=1` it fails instead. `tests/README.md` maps the scenarios to trial names.

pub mod binding;
pub mod bindings;
pub mod check;
pub mod harness;
pub mod probe;
pub mod resources;
pub mod scenarios;
#[cfg(test)]
mod types;
