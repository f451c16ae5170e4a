//! The xtask acts on the checkout it is run in, not the one it was compiled in.
//!
//! Two checkouts that share one `CARGO_TARGET_DIR` (main and a backport branch, say) run the
//! same `xtask` binary when cargo finds it fresh, so a root baked in at compile time would make
//! `cargo xtask verify` in the second checkout check the first one's files. These tests run the
//! real binary in a second copy of the workspace, the way `cargo xtask` runs it there.

mod fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// This checkout's root, from the `CARGO_MANIFEST_DIR` cargo sets when it runs the test.
fn this_checkout() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&dir).parent().unwrap().to_path_buf()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A second checkout holding what `verify` reads: the workspace manifest, the allow-lists (which
/// mark a workspace root), the target list and the generated crate.
fn second_checkout() -> tempfile::TempDir {
    let here = this_checkout();
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path();
    std::fs::copy(here.join("Cargo.toml"), b.join("Cargo.toml")).unwrap();
    copy_tree(
        &here.join("generator/allowlist"),
        &b.join("generator/allowlist"),
    );
    std::fs::copy(
        here.join("generator/targets.txt"),
        b.join("generator/targets.txt"),
    )
    .unwrap();
    copy_tree(&here.join("generated/src"), &b.join("generated/src"));
    std::fs::create_dir_all(b.join("xtask")).unwrap();
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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("CARGO_MANIFEST_DIR")
        .env("HOSTCB_INPUTS_CACHE", fixture::cache());
    if let Some(dir) = manifest_dir {
        cmd.env("CARGO_MANIFEST_DIR", dir);
    }
    cmd.output().unwrap()
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
