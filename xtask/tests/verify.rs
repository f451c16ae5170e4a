//! `cargo xtask verify` on damaged copies of the committed bindings: every failure is one line
//! naming the file, the reason and the `--ctk` to regenerate, and nothing makes it hang.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hostcb_seal::{marker, seal};

use crate::fixture::{copy_tree, mkfifo, output_within, stderr_of, workspace, xtask};

/// A copy of the committed `generated/src/bindings/` under a temporary `generated/`.
fn copy_of_bindings() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("generated");
    copy_tree(
        &workspace().join("generated/src/bindings"),
        &root.join("src/bindings"),
    );
    (dir, root)
}

/// Runs `cargo xtask verify PATH...`, failing the test if it does not finish within a minute
/// (blocked on a FIFO?); returns whether it succeeded, and its standard error.
fn verify(paths: &[&Path]) -> (bool, String) {
    let out = output_within(
        xtask(&workspace(), &["verify"]).args(paths),
        Duration::from_secs(60),
    );
    (out.status.success(), stderr_of(&out))
}

/// The lines of `stderr` that start with `path`: the failures verify printed for it.
fn lines_for(stderr: &str, path: &Path) -> Vec<String> {
    let prefix = format!("{}: ", path.display());
    stderr
        .lines()
        .filter(|line| line.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_committed_bindings_verify() {
    let (ok, stderr) = verify(&[]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("17 sealed file(s) checked"), "{stderr}");
}

#[test]
fn a_13_0_file_copied_over_the_12_9_one_fails() {
    let (_dir, root) = copy_of_bindings();
    let bindings = root.join("src/bindings");
    let file = bindings.join("ctk_12_9/driver.rs");
    fs::copy(bindings.join("ctk_13_0/driver.rs"), &file).unwrap();
    let (ok, stderr) = verify(&[&root]);
    assert!(!ok, "{stderr}");
    assert_eq!(
        lines_for(&stderr, &file),
        [format!(
            "{}: sealed for ctk=13.0, but its folder ctk_12_9 holds ctk=12.9; \
             regenerate with cargo xtask regen --ctk 12.9",
            file.display()
        )],
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn a_sealed_file_replaced_by_a_symlink_to_an_edited_copy_fails() {
    let (dir, root) = copy_of_bindings();
    let file = root.join("src/bindings/ctk_13_5/runtime.rs");
    // Edited, then sealed again so that the copy checks on its own.
    let text = fs::read_to_string(&file).unwrap();
    let unsealed: String = text
        .split_inclusive('\n')
        .filter(|line| !line.contains(marker()))
        .collect();
    let edited = seal(&unsealed.replacen("pub ", "pub(crate) ", 1), "13.5", "//").unwrap();
    let copy = dir.path().join("edited.rs");
    fs::write(&copy, edited).unwrap();
    assert!(
        hostcb_seal::verify_paths(std::slice::from_ref(&copy))
            .unwrap()
            .is_ok()
    );
    fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&copy, &file).unwrap();

    let (ok, stderr) = verify(&[&root]);
    assert!(!ok, "{stderr}");
    let lines = lines_for(&stderr, &file);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("is a symbolic link"), "{stderr}");
    assert!(
        lines[0].ends_with("cargo xtask regen --ctk 13.5"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_named_directly_fails_fast_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("driver.rs");
    mkfifo(&fifo);
    let (ok, stderr) = verify(&[&fifo]);
    assert!(!ok, "{stderr}");
    let lines = lines_for(&stderr, &fifo);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!("{}: is a FIFO", fifo.display())),
        "{stderr}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{stderr}"
    );
}
