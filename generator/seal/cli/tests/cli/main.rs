//! The `hostcb-seal` command's integration tests, in one executable (`cargo test -p
//! hostcb-seal-cli --test cli [FILTER]`): `verify` runs the built command on temporary trees,
//! `hooks` runs the git hooks this repository offers, with that command, in temporary
//! repositories.

mod hooks;
mod verify;
