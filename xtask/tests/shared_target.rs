//! Two checkouts sharing one `CARGO_TARGET_DIR`: `cargo xtask` in the one built less recently
//! must run its own generator, not the other checkout's.
//!
//! cargo names the artifacts of path packages by their place in the workspace and finds them
//! fresh by file times, so after a build in checkout A, `cargo xtask` in an older checkout B
//! finds A's binary (A's generator, linked from A's rlib) fresh and runs it on B's files. This
//! test clones the committed HEAD (commit first) twice, gives B a generator whose output differs, builds in A
//! and runs `cargo xtask check` in B: it must report B's files stale. It builds the workspace
//! crates twice (under a minute, seeded from this test's own target dir).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn this_checkout() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&dir).parent().unwrap().to_path_buf()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A clone of this checkout's committed HEAD.
fn clone_head(into: &Path) {
    let here = this_checkout();
    let head = run(Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&here));
    let head = String::from_utf8(head.stdout).unwrap();
    run(Command::new("git")
        .args(["clone", "--quiet", "--no-checkout"])
        .arg(&here)
        .arg(into));
    run(Command::new("git")
        .args(["checkout", "--quiet", "--detach", head.trim()])
        .current_dir(into));
}

/// Copies what cargo reuses (the dependencies' artifacts, build scripts and fingerprints) from
/// the target dir this test was built in, so the shared target dir rebuilds only the workspace
/// crates. Incremental caches and the executables in `deps/` (test binaries, most of its bytes:
/// about 3 of 4 GB here) are left out: nothing this test builds links them.
fn seed_target_dir(target: &Path) {
    let exe = std::env::current_exe().unwrap();
    let Some(profile) = exe.parent().and_then(Path::parent) else {
        return;
    };
    let seeded = target.join("debug");
    for dir in ["build", ".fingerprint"] {
        if profile.join(dir).is_dir() {
            std::fs::create_dir_all(&seeded).unwrap();
            run(Command::new("cp")
                .arg("-a")
                .arg(profile.join(dir))
                .arg(&seeded));
        }
    }
    let deps = profile.join("deps");
    let Ok(entries) = std::fs::read_dir(&deps) else {
        return;
    };
    // Libraries and dep-info files have an extension; executables have none.
    let keep: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some())
        .collect();
    std::fs::create_dir_all(seeded.join("deps")).unwrap();
    for chunk in keep.chunks(500) {
        run(Command::new("cp")
            .arg("-a")
            .args(chunk)
            .arg(seeded.join("deps")));
    }
}

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

/// `cargo <args>` in `checkout`, with the shared target dir and nothing of the outer cargo's
/// environment that would point it elsewhere.
fn cargo(checkout: &Path, target: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let cache = std::env::var_os("HOSTCB_INPUTS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| this_checkout().join("target/hostcb-inputs"));
    Command::new(cargo)
        .args(args)
        .current_dir(checkout)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("HOSTCB_XTASK_REBUILT")
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_NET_OFFLINE", "true")
        .env("HOSTCB_INPUTS_CACHE", cache)
        .output()
        .unwrap()
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
    let emit = b.join("generator/src/emit.rs");
    let text = std::fs::read_to_string(&emit).unwrap();
    let edited = text.replacen("headers. Do not edit:", "headers; do not edit:", 1);
    assert_ne!(text, edited, "emit.rs has the header text to change");
    std::fs::write(&emit, edited).unwrap();
    age(&b);

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
    let out = Command::new(target.join("debug/xtask"))
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
