//! One process loads one libclang: activating the pinned one twice (or the same bytes under
//! another path) reuses it; a libclang of other bytes is refused, before anything writes the
//! environment.
//!
//! The rule is per process, and the other tests of this executable load the pinned libclang in
//! its process at any moment (while the first load runs, `LIBCLANG_PATH` is set for it). So the
//! test runs this executable again, filtered to this test alone with [`CHILD_ENV`] set: in that
//! process the first activation is this test's own, and nothing else touches the environment.

use std::process::Command;

use hostcb_generator::inputs::{self, Libclang};

use crate::config;

/// Set in the child that makes the checks.
const CHILD_ENV: &str = "HOSTCB_LIBCLANG_ONCE_CHILD";

#[test]
fn a_process_loads_one_libclang() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return loads_one_libclang();
    }
    // This test's name as the harness knows it: its module path without the crate's name.
    let name = format!(
        "{}::a_process_loads_one_libclang",
        module_path!().split_once("::").unwrap().1
    );
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1");
    // The libclang choice this process started with: another test's first load may have
    // `LIBCLANG_PATH` set at this moment.
    match &crate::environment().libclang_path {
        Some(path) => child.env("LIBCLANG_PATH", path),
        None => child.env_remove("LIBCLANG_PATH"),
    };
    let out = child.output().expect("run this executable again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the child failed ({}):\n{text}",
        out.status
    );
    // Passed, not filtered away: a test that did not run proves nothing.
    assert!(
        text.contains("test result: ok. 1 passed;"),
        "the child did not run {name}:\n{text}"
    );
}

/// The checks, in a process of their own.
fn loads_one_libclang() {
    let before = std::env::var_os("LIBCLANG_PATH");
    let pinned = inputs::libclang(&config().inputs).expect("the pinned libclang");
    pinned.activate().expect("the pinned libclang loads");
    pinned.activate().expect("activating it again reuses it");
    let elsewhere = Libclang {
        library: "/nowhere/libclang.so".into(),
        ..pinned.clone()
    };
    elsewhere
        .activate()
        .expect("the same bytes under another path reuse the loaded library");

    let mut other = pinned.clone();
    other.library = "/nowhere/other/libclang.so".into();
    other.source.sha256 = "0".repeat(64);
    let err = other.activate().expect_err("another libclang is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("has loaded another libclang already") && msg.contains(&pinned.source.sha256),
        "{msg}"
    );
    assert_eq!(
        std::env::var_os("LIBCLANG_PATH"),
        before,
        "the environment is as it was"
    );
}
