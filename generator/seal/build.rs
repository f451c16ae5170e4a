//! Records the SHA-256 of this crate's sources (see `src/sources.rs`).

#[path = "src/sources.rs"]
mod sources;

fn main() {
    sources::record();
}
