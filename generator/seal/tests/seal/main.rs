//! The seal library's integration tests, in one executable (`cargo test -p hostcb-seal --test
//! seal [FILTER]`): `contents` seals and checks one file's text, `verify` checks trees of files
//! (with and without git), `index` checks what git's index holds.

use std::fs;
use std::path::Path;
use std::process::Command;

mod contents;
mod index;
mod verify;

/// Writes `text` to `path`, creating its folders.
fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Runs git in `dir` with a fixed identity and none of the caller's repository settings
/// (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`), failing the test if git fails.
fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("these tests need `git` on PATH");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
