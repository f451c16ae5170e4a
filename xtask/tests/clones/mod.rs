//! Helpers of the tests that run on real clones of this repository, each built in a target
//! folder of its own (`shared_target.rs`, `targets.rs`, `backport.rs`).

#![allow(dead_code, reason = "each test file uses a part")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// This checkout's root, from the `CARGO_MANIFEST_DIR` cargo sets when it runs the test.
pub fn this_checkout() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&dir).parent().unwrap().to_path_buf()
}

/// Runs `cmd`, failing the test with its stderr unless it succeeds.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `git <args>` in `dir`, which must succeed; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = run(Command::new("git").args(args).current_dir(dir));
    String::from_utf8(out.stdout).unwrap()
}

/// A clone of this checkout's committed HEAD (commit first: uncommitted changes are not in it).
pub fn clone_head(into: &Path) {
    let here = this_checkout();
    let head = git(&here, &["rev-parse", "HEAD"]);
    run(Command::new("git")
        .args(["clone", "--quiet", "--no-checkout"])
        .arg(&here)
        .arg(into));
    git(into, &["checkout", "--quiet", "--detach", head.trim()]);
}

/// The tests' input cache ([`crate::fixture::cache`]: the same pinned, hash-checked files), for a
/// clone.
pub fn inputs_cache() -> PathBuf {
    crate::fixture::cache()
}

/// Seeds `target` with what cargo reuses of the target folder this test was built in (the
/// dependencies' artifacts, build scripts and fingerprints; libraries hard-linked where
/// possible), so a build there rebuilds only the workspace crates. Incremental caches and the
/// executables in `deps/` (test binaries, most of its bytes) are left out: nothing a clone
/// builds links them.
pub fn seed_target_dir(target: &Path) {
    let exe = std::env::current_exe().unwrap();
    let Some(profile) = exe.parent().and_then(Path::parent) else {
        return;
    };
    let seeded = target.join("debug");
    std::fs::create_dir_all(seeded.join("deps")).unwrap();
    for dir in ["build", ".fingerprint"] {
        if profile.join(dir).is_dir() {
            run(Command::new("cp")
                .arg("-a")
                .arg(profile.join(dir))
                .arg(&seeded));
        }
    }
    let Ok(entries) = std::fs::read_dir(profile.join("deps")) else {
        return;
    };
    // Libraries and dep-info files have an extension; executables have none.
    let libraries: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some())
        .collect();
    for chunk in libraries.chunks(500) {
        let linked = Command::new("cp")
            .arg("-al")
            .args(chunk)
            .arg(seeded.join("deps"))
            .status()
            .unwrap();
        if !linked.success() {
            run(Command::new("cp")
                .arg("-a")
                .args(chunk)
                .arg(seeded.join("deps")));
        }
    }
}

/// `cargo <args>` in `checkout`, with the target folder `target`, this checkout's input cache,
/// offline, and nothing of the outer cargo's environment that would point it elsewhere.
pub fn cargo(checkout: &Path, target: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(args)
        .current_dir(checkout)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("HOSTCB_XTASK_REBUILT")
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_NET_OFFLINE", "true")
        .env("HOSTCB_INPUTS_CACHE", inputs_cache())
        .output()
        .unwrap()
}
