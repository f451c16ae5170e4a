//! Targets are data: the list in `generator/targets.txt` decides which targets the generated
//! crate holds, its module list, its features and `for_each_target!`; a full regen deletes the
//! sealed files of targets taken off the list. Run on a copy of the workspace whose list is
//! changed, with the real xtask binary and the real pinned inputs.

use std::path::Path;
use std::process::{Command, Output};

use crate::fixture::{
    HUNG, one_build_at_a_time, output_within, seed_target_dir, succeeds, workspace, workspace_copy,
    xtask,
};

/// `cargo xtask <args>` in the checkout at `root`.
fn run(root: &Path, args: &[&str]) -> Output {
    output_within(&mut xtask(root, args), HUNG)
}

#[test]
fn taking_targets_off_the_list_removes_them_everywhere_and_nothing_else() {
    let copy = workspace_copy();
    let root = copy.path();
    std::fs::write(root.join("generator/targets.txt"), "# only one\n13.0\n").unwrap();

    // A single target off the list is refused, naming the list.
    let out = run(root, &["regen", "--ctk", "12.9"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "CTK 12.9 is pinned but generated/ does not hold it: add 12.9 to generator/targets.txt"
        ),
        "{stderr}"
    );
    // Check sees the files of the targets taken off the list.
    let out = run(root, &["check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("src/bindings/ctk_12_9/driver.rs") && stderr.contains("regen deletes it"),
        "{stderr}"
    );

    let regen = succeeds(&mut xtask(root, &["regen", "--ctk", "all"]));
    assert!(regen.contains(", 10 deleted,"), "{regen}");
    let generated = root.join("generated");
    for gone in ["ctk_12_9", "ctk_13_5"] {
        assert!(
            !generated.join("src/bindings").join(gone).exists(),
            "{gone} is still there:\n{regen}"
        );
    }
    assert!(generated.join("src/bindings/ctk_13_0/driver.rs").is_file());
    let module_list = std::fs::read_to_string(generated.join("src/bindings/mod.rs")).unwrap();
    assert!(module_list.contains("pub mod ctk_13_0;"), "{module_list}");
    assert!(!module_list.contains("ctk_12_9"), "{module_list}");
    let manifest = std::fs::read_to_string(generated.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("ctk-13-0 = []\nall-targets = [\"ctk-13-0\"]\n"),
        "{manifest}"
    );
    assert!(!manifest.contains("ctk-12-9"), "{manifest}");
    // The rest of the manifest is kept as it was.
    assert!(manifest.contains("[dependencies]\nlibloading.workspace = true"));

    // The result verifies and is current.
    succeeds(&mut xtask(root, &["verify"]));
    succeeds(&mut xtask(root, &["check"]));
    let again = succeeds(&mut xtask(root, &["regen", "--ctk", "all"]));
    assert!(
        again.contains(", 0 written, 8 unchanged, 0 deleted"),
        "{again}"
    );
}

/// Every file of this work tree that git tracks or would track (committed or not), copied under
/// `to`: the whole workspace as it is now.
fn whole_workspace_copy(to: &Path) {
    let here = workspace();
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(&here)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files failed");
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let rel = Path::new(std::str::from_utf8(name).unwrap());
        let from = here.join(rel);
        // A file deleted in the work tree but not yet in the index.
        if !from.is_file() {
            continue;
        }
        let into = to.join(rel);
        std::fs::create_dir_all(into.parent().unwrap()).unwrap();
        std::fs::copy(&from, &into).unwrap();
    }
}

/// No hand-written file names a target: with the list shrunk to one target other than the one
/// the README's examples use, a full regen and `cargo check` of every crate that builds on the
/// generated one (each of its libraries, tests, examples and benchmarks, with every feature) pass.
/// The crates that do not depend on it (the generator, the seal crates, the xtask) read the
/// list only at run time, so they compile the same whatever it says. A scratch copy of the whole
/// workspace, with the dependencies' check artifacts seeded from this test's target folder.
#[test]
fn the_workspace_builds_with_any_one_target_listed() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (root, target) = (tmp.path().join("copy"), tmp.path().join("target"));
    whole_workspace_copy(&root);
    std::fs::write(root.join("generator/targets.txt"), "# only one\n12.9\n").unwrap();
    let regen = succeeds(&mut xtask(&root, &["regen", "--ctk", "all"]));
    assert!(
        !root.join("generated/src/bindings/ctk_13_0").exists(),
        "{regen}"
    );

    let _build = one_build_at_a_time();
    seed_target_dir(&target);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Every package of the copy that depends on the generated crate, itself included.
    let tree = Command::new(&cargo)
        .args(["tree", "--offline", "--workspace", "-i", "cuda-hostcb"])
        .args([
            "-e",
            "normal,dev,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(&root)
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .unwrap();
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let tree = String::from_utf8(tree.stdout).unwrap();
    let mut packages: Vec<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    packages.sort_unstable();
    packages.dedup();
    for needed in [
        "cuda-hostcb",
        "cuda-hostcb-safe",
        "hostcb-tests",
        "cuda-hostcb-examples",
    ] {
        assert!(packages.contains(&needed), "{needed} in {packages:?}");
    }
    let out = Command::new(cargo)
        .args(["check", "--quiet", "--all-targets", "--all-features"])
        .args(packages.iter().flat_map(|p| ["-p", p]))
        .current_dir(&root)
        .env_remove("CARGO_MANIFEST_DIR")
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "with only 12.9 listed, the workspace does not build:\n{stderr}"
    );
}
