//! The xtask acts on the checkout it is run in, not the one it was compiled in.
//!
//! Two checkouts that share one `CARGO_TARGET_DIR` (main and a backport branch, say) run the
//! same `xtask` binary when cargo finds it fresh, so a root baked in at compile time would make
//! `cargo xtask verify` in the second checkout check the first one's files. These tests run the
//! real binary in a second copy of the workspace, the way `cargo xtask` runs it there.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::fixture::{HUNG, output_within, workspace_copy};

/// A second checkout holding what `verify` reads (a copy of this one's data), and an `xtask/`
/// folder for cargo to run the xtask from.
fn second_checkout() -> tempfile::TempDir {
    let dir = workspace_copy();
    std::fs::create_dir_all(dir.path().join("xtask")).unwrap();
    dir
}

/// Changes one ABI version in a sealed file of the second checkout; returns the file.
fn tamper(b: &Path) -> PathBuf {
    let file = b.join("generated/src/bindings/ctk_13_0/driver.rs");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replacen("10000", "13050", 1);
    assert_ne!(text, edited, "the file has an ABI version to change");
    std::fs::write(&file, edited).unwrap();
    file
}

fn xtask(cwd: &Path, manifest_dir: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = crate::fixture::xtask(cwd, args);
    if let Some(dir) = manifest_dir {
        cmd.env("CARGO_MANIFEST_DIR", dir);
    }
    output_within(&mut cmd, HUNG)
}

fn assert_fails_naming(out: &Output, file: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "verify passed over a tampered file in the second checkout:\n{stderr}"
    );
    assert!(
        stderr.contains(&file.display().to_string()),
        "verify did not name {}:\n{stderr}",
        file.display()
    );
}

#[test]
fn verify_checks_the_checkout_cargo_runs_it_in() {
    let b = second_checkout();
    let file = tamper(b.path());
    // As `cargo xtask verify` runs it in the second checkout: CARGO_MANIFEST_DIR is its xtask/.
    let out = xtask(b.path(), Some(&b.path().join("xtask")), &["verify"]);
    assert_fails_naming(&out, &file);
}

#[test]
fn verify_run_directly_checks_the_checkout_around_the_current_directory() {
    let b = second_checkout();
    let file = tamper(b.path());
    let out = xtask(&b.path().join("generated/src"), None, &["verify"]);
    assert_fails_naming(&out, &file);
}

#[test]
fn outside_any_checkout_says_so_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = xtask(dir.path(), None, &["verify"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot find the workspace to act on"),
        "{stderr}"
    );
}
