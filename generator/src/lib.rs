//! The generator of the CUDA host-callback bindings: headers → model → code → seal.
//!
//! The pipeline reads like windows-bindgen's: [`inputs`] fetches and checks what generation
//! reads (pinned header packages, a pinned libclang), [`reader`] runs bindgen over the headers
//! and turns its output into the plain-data [`model`], [`writer`] fills the wrapper templates
//! from the model (with [`doc`] turning the headers' Doxygen comments into Markdown), and
//! [`emit`] formats, seals and writes the files. [`pipeline`] strings them together for one
//! target. [`diff`] compares the models of two targets.

pub mod allowlist;
pub mod audit;
pub mod config;
pub mod diff;
pub mod doc;
pub mod emit;
pub mod history;
pub mod inputs;
pub mod layout;
pub mod manifest;
pub mod model;
pub mod pipeline;
pub mod reader;
pub mod shared;
pub mod target;
pub mod writer;

pub use target::Ctk;

/// The SHA-256 of the sources this crate was compiled from (see [`hostcb_seal::sources`]).
pub const BUILT_FROM_SOURCES: &str = env!("HOSTCB_BUILT_FROM_SOURCES");
