//! Records the SHA-256 of this crate's sources (see `hostcb_seal::sources`).

fn main() {
    hostcb_seal::sources::record();
}
