//! Two checkouts sharing one `CARGO_TARGET_DIR`: `cargo xtask` in the one built less recently
//! must run its own generator, not the other checkout's.
//!
//! cargo names the artifacts of path packages by their place in the workspace and finds them
//! fresh by file times, so after a build in checkout A, `cargo xtask` in an older checkout B
//! finds A's binary (A's generator, linked from A's rlib) fresh and runs it on B's files. This
//! test clones the committed HEAD (commit first) twice, gives B a generator whose output differs, builds in A
//! and runs `cargo xtask check` in B: it must report B's files stale. It builds the workspace
//! crates twice (under a minute, seeded from this test's own target dir).

use std::path::Path;
use std::process::Command;

use crate::fixture::{cargo, clone_head, one_build_at_a_time, run, seed_target_dir};

/// Sets the times of every file and folder under `root` to 2020, as in a checkout last touched
/// long before the other one was built.
fn age(root: &Path) {
    run(Command::new("find").arg(root).args([
        "-exec",
        "touch",
        "-h",
        "-d",
        "2020-01-01T00:00:00",
        "{}",
        "+",
    ]));
}

#[test]
fn cargo_xtask_in_the_older_checkout_runs_its_own_generator() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, target) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("target"),
    );
    clone_head(&a);
    clone_head(&b);

    // B's generator writes another header line, so each of B's generated files is stale for it.
    let emit = b.join("generator/src/emit/render.rs");
    let text = std::fs::read_to_string(&emit).unwrap();
    let edited = text.replacen(". Do not edit:", "; do not edit:", 1);
    assert_ne!(text, edited, "render.rs has the header text to change");
    std::fs::write(&emit, edited).unwrap();
    age(&b);

    let _build = one_build_at_a_time();
    seed_target_dir(&target);
    let built = cargo(&a, &target, &["build", "--package", "xtask"]);
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let out = cargo(&b, &target, &["xtask", "check", "--ctk", "13.0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("generated files match"),
        "B ran A's generator:\n{stderr}"
    );
    assert!(
        stderr.contains("generated file(s) are stale"),
        "B's generator did not report B's files stale:\n{stderr}"
    );
    assert!(
        stderr.contains("came from another checkout's sources"),
        "no line said why it rebuilt:\n{stderr}"
    );
    assert!(!out.status.success(), "{stderr}");
    eprintln!("{stderr}");

    // The binary is B's now; run directly in A (not through cargo), it cannot rebuild: one line
    // says what to do.
    let out = crate::fixture::hermetic(&mut Command::new(target.join("debug/xtask")))
        .args(["check", "--ctk", "13.0"])
        .current_dir(&a)
        .env_remove("CARGO")
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: this xtask binary links hostcb-generator")
            && stderr.contains("CARGO_TARGET_DIR"),
        "{stderr}"
    );
    eprintln!("{stderr}");
}
