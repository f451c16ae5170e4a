//! One build's dependencies are the next one's: `cargo xtask test` builds the xtask first, then
//! the workspace's tests, and a contributor's loop builds one crate's tests after that. Cargo
//! compiles a dependency again whenever a build resolves another feature set for it, and with it
//! every crate above it: memchr's `default` feature, which only the xtask's dev-dependency
//! pulldown-cmark asked for, once made the test build compile regex, bindgen and the generator a
//! second time (about 90 s of CPU on 2 cores). `cargo tree` resolves features as those builds do.

use std::collections::BTreeSet;

use crate::fixture::{run, workspace};

/// Each dependency (not a workspace member) that `cargo tree <args>` resolves, with its features.
fn dependencies(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = run(std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "--prefix",
            "none",
            "-f",
            "{p} {f}",
        ])
        .args(args)
        .current_dir(workspace()));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_end_matches(" (*)"))
        // A workspace member is listed with its path.
        .filter(|l| !l.contains(" (/"))
        .map(str::to_owned)
        .collect()
}

/// Each build compiles each dependency once: syn, asked for by the proc macros and by the
/// generator with other features, was compiled twice by every build of the xtask (about 20 s of
/// CPU), until the xtask and the gate asked for the generator's features on the proc macros' side.
#[test]
fn each_build_compiles_a_dependency_with_one_feature_set() {
    for (build, args) in BUILDS {
        let mut seen = BTreeSet::new();
        let twice: Vec<String> = dependencies(args)
            .into_iter()
            .filter(|line| !seen.insert(line.split(' ').take(2).collect::<Vec<_>>().join(" ")))
            .collect();
        assert!(
            twice.is_empty(),
            "`{build}` compiles these dependencies twice, each time with other features (the \
             proc macros' copy and the rest's): ask for one feature set on both sides: {twice:#?}"
        );
    }
}

/// The builds of `cargo xtask test` and of a contributor's loop, as `cargo tree` arguments.
const BUILDS: [(&str, &[&str]); 3] = [
    (
        "cargo test --workspace --all-features --exclude hostcb-loom",
        &["--workspace", "--all-features", "--exclude", "hostcb-loom"],
    ),
    ("cargo xtask", &["-p", "xtask", "-e", "normal,build"]),
    (
        "cargo test -p cuda-hostcb-safe",
        &["-p", "cuda-hostcb-safe"],
    ),
];

/// What the tests step of `cargo xtask test` builds (`xtask/src/ci.rs`): every dependency of
/// the first build (`cargo xtask`, the xtask without its dev-dependencies) and of the edit loop
/// (`cargo test -p cuda-hostcb-safe`, docs/testing.md) is one it has already compiled.
#[test]
fn the_test_build_reuses_the_xtask_build_and_the_edit_loop_reuses_it() {
    let tests = dependencies(BUILDS[0].1);
    for (build, args) in &BUILDS[1..] {
        let other: Vec<String> = dependencies(args).difference(&tests).cloned().collect();
        assert!(
            other.is_empty(),
            "`{build}` compiles dependencies with features the test build does not, so one of \
             the two compiles them and all above them again; give both one feature set \
             (a dependency of the generator's that asks for the features, as it does for \
             memchr): {other:#?}"
        );
    }
}
