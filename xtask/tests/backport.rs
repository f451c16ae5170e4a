//! The README's backport ("Backporting to a maintenance branch"), on two real clones: main (this
//! checkout's committed HEAD, three targets) and a maintenance branch cloned from it whose
//! `generator/targets.txt` lists 12.9 alone and whose generator is older (one word of the
//! header differs), regenerated and committed by its own generator. `regen --out` from main
//! writes the maintenance tree for its own list (or refuses a target it lacks), the maintenance
//! branch's `check` names both generators until it has main's, and after the README's steps its
//! `verify` and `check` pass and its 12.9 files define what main's do (`mod.rs` and `layout.rs`
//! byte for byte, the API files item for item, shared types resolved through `common.rs`).
//!
//! Commit first: main is the committed HEAD, run with this test's own xtask binary. The
//! maintenance clone builds its xtask twice (its old generator, then main's) in a target folder
//! of its own, seeded from this test's: a few minutes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::fixture::{
    HUNG, cache, cargo, changed, clone_head, files_under, git, one_build_at_a_time, output_within,
    run, seed_target_dir, stderr_of, workspace,
};

/// `cargo xtask <args>` of main: this test's xtask binary (built from the sources main's clone
/// holds), run in `cwd` directly (so it cannot rebuild itself from another checkout).
fn main_xtask(cwd: &Path, args: &[&str]) -> Output {
    output_within(crate::fixture::xtask(cwd, args).env_remove("CARGO"), HUNG)
}

fn succeeded(what: &str, out: Output) -> String {
    let text = stderr_of(&out);
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// The shell block of the guide's section "Backporting to a maintenance branch" (docs/generator.md).
fn readme_backport_steps() -> String {
    let readme = std::fs::read_to_string(workspace().join("docs/generator.md")).unwrap();
    let section = readme
        .split("\n## Backporting to a maintenance branch\n")
        .nth(1)
        .expect("docs/generator.md has a section \"Backporting to a maintenance branch\"");
    let block = section
        .split("\n```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```\n").next())
        .expect("the section has a ```sh block");
    assert!(
        !section[..section.find(block).unwrap()].contains("\n## "),
        "the ```sh block lies in a later section"
    );
    block.to_owned()
}

/// The maintenance tree's all-target files name 12.9 alone, and its 12.9 files are main's.
fn assert_holds_main_12_9_alone(maint: &Path, main: &Path, when: &str) {
    let module_list = std::fs::read_to_string(maint.join("generated/src/bindings/mod.rs")).unwrap();
    for names in [
        "pub mod ctk_13_0;",
        "pub mod ctk_13_5;",
        "feature = \"ctk-13-0\"",
        "feature = \"ctk-13-5\"",
        "| 13.0 |",
        "| 13.5 |",
    ] {
        assert!(
            !module_list.contains(names),
            "{when}: the maintenance tree's src/bindings/mod.rs has `{names}`, of a target its list lacks"
        );
    }
    assert!(module_list.contains("| function | 12.9 |\n"), "{when}");
    assert!(module_list.contains("pub mod ctk_12_9;"), "{when}");
    let manifest = std::fs::read_to_string(maint.join("generated/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(
            "ctk-12-9 = []\nall-targets = [\"ctk-12-9\"]\nnewest-target = [\"ctk-12-9\"]\n"
        ),
        "{when}: the maintenance tree's features are not 12.9's alone:\n{manifest}"
    );
    let bindings = |root: &Path| files_under(&root.join("generated/src/bindings"));
    let (ours, theirs) = (bindings(maint), bindings(main));
    let dirs: Vec<&Path> = ours
        .keys()
        .filter_map(|p| p.parent())
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    assert!(
        dirs.iter().all(|d| *d == Path::new("ctk_12_9")),
        "{when}: {dirs:?}"
    );
    let of_12_9 = |files: &BTreeMap<PathBuf, Vec<u8>>| {
        files
            .iter()
            .filter(|(p, _)| p.starts_with("ctk_12_9"))
            .map(|(p, b)| (p.clone(), b.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let (ours, theirs) = (of_12_9(&ours), of_12_9(&theirs));
    assert_eq!(ours.len(), 5, "{when}: {:?}", ours.keys());
    // The module and layout files are main's byte for byte. The API files re-export the types a
    // crate's targets share from its `common` module, and which are shared depends on the target
    // list: each must define what main's does, every type resolved through `common`, docs aside.
    for (path, bytes) in &theirs {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        match name {
            "driver.rs" | "runtime.rs" => assert!(
                definitions(maint, name) == definitions(main, name),
                "{when}: the maintenance tree's {} defines other items than main's",
                path.display()
            ),
            "provenance.toml" => {}
            _ => assert!(
                ours.get(path) == Some(bytes),
                "{when}: the maintenance tree's {} is not main's",
                path.display()
            ),
        }
    }
}

/// Every item 12.9's `file` of the checkout at `root` defines, a re-export of a shared type
/// replaced by that type's items in `common.rs`, as tokens without docs, grouped as the model
/// groups them.
fn definitions(root: &Path, file: &str) -> BTreeMap<String, Vec<String>> {
    use hostcb_generator::reader::group_of;
    use hostcb_generator::shared::without_docs;
    use quote::ToTokens;
    let bindings = root.join("generated/src/bindings");
    let parse = |path: PathBuf| {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .items
    };
    let text = |item: &syn::Item| without_docs(item.to_token_stream()).to_string();
    let mut common: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in parse(bindings.join("common.rs")) {
        common.entry(group_of(&item)).or_default().push(text(&item));
    }
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in parse(bindings.join("ctk_12_9").join(file)) {
        let shared = match &item {
            syn::Item::Use(u) => match &u.tree {
                syn::UseTree::Path(p) if p.ident == "crate" => match &*p.tree {
                    syn::UseTree::Path(c) if c.ident == "common" => match &*c.tree {
                        syn::UseTree::Name(n) => Some(n.ident.to_string()),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        match shared {
            Some(name) => {
                let items = common
                    .get(&name)
                    .unwrap_or_else(|| panic!("{name} is not in common.rs"));
                out.entry(name).or_default().extend(items.iter().cloned());
            }
            None => out.entry(group_of(&item)).or_default().push(text(&item)),
        }
    }
    for items in out.values_mut() {
        items.sort();
    }
    out
}

#[test]
fn the_readme_backport_leaves_the_maintenance_branch_green() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (main, maint, target) = (
        tmp.path().join("main"),
        tmp.path().join("release-12"),
        tmp.path().join("target"),
    );
    // The two builds of the maintenance clone's xtask, one build of a clone at a time.
    let _build = one_build_at_a_time();
    clone_head(&main);
    git(&main, &["checkout", "--quiet", "-B", "main"]);

    // The maintenance branch: main's clone, 12.9 alone, an older generator; its own generator
    // made its files and its own check passes.
    run(Command::new("git")
        .args(["clone", "--quiet"])
        .arg(&main)
        .arg(&maint));
    git(&maint, &["checkout", "--quiet", "-b", "release-12"]);
    let emit = maint.join("generator/src/emit/render.rs");
    let text = std::fs::read_to_string(&emit).unwrap();
    let older = text.replacen(". Do not edit:", "; do not edit:", 1);
    assert_ne!(text, older, "render.rs has the header text to change");
    std::fs::write(&emit, older).unwrap();
    std::fs::write(
        maint.join("generator/targets.txt"),
        "# The maintenance branch: CUDA 12 only.\n12.9\n",
    )
    .unwrap();
    seed_target_dir(&target);
    succeeded(
        "the maintenance branch's regen --ctk all",
        cargo(&maint, &target, &["xtask", "regen", "--ctk", "all"]),
    );
    succeeded(
        "the maintenance branch's check",
        cargo(&maint, &target, &["xtask", "check"]),
    );
    git(&maint, &["add", "--all"]);
    git(
        &maint,
        &[
            "-c",
            "user.name=maintainer",
            "-c",
            "user.email=maintainer@localhost",
            "commit",
            "--quiet",
            "-m",
            "release-12: CUDA 12.9 only",
        ],
    );
    let out_dir = maint.join("generated");
    let out_arg = out_dir.to_str().unwrap();

    // regen --out from main writes the tree for its own list: 12.9's files are main's, and the
    // module list, features and macros name 12.9 alone.
    succeeded(
        "main's regen --ctk 12.9 --out",
        main_xtask(&main, &["regen", "--ctk", "12.9", "--out", out_arg]),
    );
    assert_holds_main_12_9_alone(&maint, &main, "after main's regen --out");
    succeeded(
        "the maintenance branch's verify after regen --out",
        cargo(&maint, &target, &["xtask", "verify"]),
    );
    // Its own (older) generator makes other files: check says whose they are and what to do.
    let check = cargo(&maint, &target, &["xtask", "check"]);
    let text = stderr_of(&check);
    assert!(!check.status.success(), "{text}");
    let error: Vec<&str> = text.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(error.len(), 1, "{text}");
    let templates = hostcb_generator::writer::Templates::load(&main.join("templates")).unwrap();
    let main_generator = format!(
        "hostcb-generator 0.1.0 (sources sha256 {}, templates sha256 {})",
        hostcb_generator::BUILT_FROM_SOURCES,
        templates.sha256()
    );
    assert!(
        error[0].contains(&format!("made by another generator, {main_generator}"))
            && error[0].contains("not by this checkout's, hostcb-generator 0.1.0 (sources sha256 ")
            && error[0].contains("Backporting to a maintenance branch"),
        "{text}"
    );
    eprintln!("{}", error[0]);

    // A target the maintenance tree does not list is refused, in one line, changing nothing.
    let before = files_under(&out_dir);
    let refused = main_xtask(&main, &["regen", "--ctk", "13.0", "--out", out_arg]);
    let text = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(1), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    let list = maint.join("generator/targets.txt").canonicalize().unwrap();
    assert!(
        text.starts_with("error: CTK 13.0 is not a target of the tree at ")
            && text.contains(&format!(
                "{} lists 12.9; add 13.0 to {}",
                list.display(),
                list.display()
            )),
        "{text}"
    );
    let changed = changed(&before, &files_under(&out_dir));
    assert!(changed.is_empty(), "the refusal changed {changed:?}");
    git(&maint, &["reset", "--quiet", "--hard"]);

    // The README's steps, as written, on the maintenance branch (main fetched as origin/main).
    let steps = readme_backport_steps();
    let ran = crate::fixture::hermetic(&mut Command::new("sh"))
        .args(["-e", "-x", "-c", &steps])
        .current_dir(&maint)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("HOSTCB_XTASK_REBUILT")
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_NET_OFFLINE", "true")
        .env("HOSTCB_INPUTS_CACHE", cache())
        .env("GIT_AUTHOR_NAME", "maintainer")
        .env("GIT_AUTHOR_EMAIL", "maintainer@localhost")
        .env("GIT_COMMITTER_NAME", "maintainer")
        .env("GIT_COMMITTER_EMAIL", "maintainer@localhost")
        .output()
        .unwrap();
    let text = succeeded("the README's backport steps", ran);
    eprintln!("{text}");

    // Afterwards the branch is green (the steps end with its `check` and `verify`, and `sh -e`
    // stops at a failing one), committed, and holds main's 12.9 files alone.
    for step in ["cargo xtask check", "cargo xtask verify", "git commit"] {
        assert!(
            steps.contains(step),
            "the README's steps no longer run `{step}`"
        );
    }
    assert_holds_main_12_9_alone(&maint, &main, "after the README's steps");
    assert_eq!(
        git(&maint, &["status", "--porcelain"]),
        "",
        "left uncommitted"
    );
    assert_eq!(
        std::fs::read_to_string(maint.join("generator/targets.txt")).unwrap(),
        "# The maintenance branch: CUDA 12 only.\n12.9\n",
        "the branch's target list is its own"
    );
}
