//! What regen and check may do to the output tree, run with the real xtask binary and the real
//! pinned inputs on a copy of the generated crate (`regen --out`) or of the checkout: delete only
//! files they can prove they wrote, leave whole files when killed or failing midway, survive an
//! overlapping run, never write through a symbolic link, and never open a FIFO where a file
//! should be.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hostcb_generator::emit::{self, tree::TEMP_PREFIX};

use crate::fixture::{
    copy_tree, crate_copy, files_under, listing_copy, mkfifo, one_error, output_within, stderr_of,
    succeeds, the_one_error, workspace, workspace_copy, xtask,
};

/// The newest listed target's folder name and `MAJOR.MINOR`, from the committed module list.
fn a_listed_target() -> (String, String) {
    let list = std::fs::read_to_string(workspace().join("generator/targets.txt")).unwrap();
    let ctk = list
        .lines()
        .rev()
        .map(|l| l.split('#').next().unwrap().trim())
        .find(|l| !l.is_empty())
        .expect("a listed target")
        .to_owned();
    (format!("ctk_{}", ctk.replace('.', "_")), ctk)
}

/// `regen --ctk <ctk> --out <out>`, run from this checkout.
fn regen(out: &Path, ctk: &str) -> std::process::Command {
    xtask(
        &workspace(),
        &["regen", "--ctk", ctk, "--out", out.to_str().unwrap()],
    )
}

/// How long a regen may take before it counts as hung.
const REGEN: Duration = Duration::from_secs(300);

/// The seal marker, spelled in two pieces so that this file never looks sealed itself.
fn marker() -> String {
    concat!("hostcb", "-seal:").to_owned()
}

#[test]
fn a_full_regen_deletes_only_files_whose_seal_proves_they_are_its_own() {
    let out = crate_copy();
    let bindings = out.path().join("src/bindings");
    let m = marker();
    // Hand-written files that quote the seal line.
    let sealing = bindings.join("SEALING.md");
    std::fs::write(
        &sealing,
        format!("# Seals\n\nEach generated file has a line like\n\n    // {m} format=1; ctk=13.0; content-sha256=...\n"),
    )
    .unwrap();
    let helpers = bindings.join("helpers.rs");
    std::fs::write(
        &helpers,
        format!("//! Helpers. A generated file starts with:\n//! `// {m} format=1; ctk=all; content-sha256=0000`\npub fn help() {{}}\n"),
    )
    .unwrap();
    // A target no longer listed: its sealed file goes, a note that quotes the marker stays.
    let old = bindings.join("ctk_12_8");
    std::fs::create_dir_all(&old).unwrap();
    let sealed = hostcb_seal::seal("// generated once\npub fn old() {}\n", "12.8", "//").unwrap();
    std::fs::write(old.join("driver.rs"), sealed).unwrap();
    // A killed regen's temporary file there does not keep the folder alive on its own.
    std::fs::write(old.join(".regen-Old123"), "half a file").unwrap();
    let note = old.join("notes.rs");
    std::fs::write(
        &note,
        format!("// {m} format=1; ctk=12.8; content-sha256=bad\n"),
    )
    .unwrap();
    // A sealed file whose seal names another target than its folder: not provably this folder's.
    let (listed, _) = a_listed_target();
    let moved = old.join("runtime.rs");
    std::fs::copy(bindings.join(&listed).join("runtime.rs"), &moved).unwrap();

    let stderr = succeeds(&mut regen(out.path(), "all"));
    for kept in [&sealing, &helpers, &note, &moved] {
        assert!(kept.is_file(), "{} was deleted:\n{stderr}", kept.display());
        assert!(
            stderr.contains(&format!("warning: kept {}", kept.display())),
            "{} kept without a word:\n{stderr}",
            kept.display()
        );
    }
    assert!(!old.join("driver.rs").exists(), "{stderr}");
    assert!(!old.join(".regen-Old123").exists(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "deleted {} (its target is no longer listed)",
            old.join("driver.rs").display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains(", 1 deleted,"), "{stderr}");
}

#[test]
fn temporaries_of_a_killed_regen_never_break_the_next_one() {
    let out = crate_copy();
    let (listed, _) = a_listed_target();
    let dir = out.path().join("src/bindings").join(&listed);
    // What a regen killed between staging and renaming leaves: whole sealed files under
    // temporary names, in a target folder and in the bindings folder.
    let driver = std::fs::read(dir.join("driver.rs")).unwrap();
    std::fs::write(dir.join(".regen-AbC123"), &driver).unwrap();
    let module_list = std::fs::read(out.path().join("src/bindings/mod.rs")).unwrap();
    std::fs::write(out.path().join("src/bindings/.regen-XyZ789"), &module_list).unwrap();

    let stderr = succeeds(&mut regen(out.path(), "all"));
    assert!(stderr.contains(", 0 deleted,"), "{stderr}");
    for left in [
        dir.join(".regen-AbC123"),
        out.path().join("src/bindings/.regen-XyZ789"),
    ] {
        assert!(!left.exists(), "{} left:\n{stderr}", left.display());
    }
}

#[test]
fn overlapping_regens_do_not_fail_each_other() {
    let out = crate_copy();
    let (listed, ctk) = a_listed_target();
    for round in 0..3 {
        // An edit in each round, so that both runs have files to write.
        let file = out
            .path()
            .join("src/bindings")
            .join(&listed)
            .join("driver.rs");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replacen("pub ", "pub  ", 1)).unwrap();
        let runs: Vec<_> = (0..2)
            .map(|_| {
                // One target: its folder, the module list, the shared types and the manifest
                // are written under the same lock as by `--ctk all`, for a third of the work.
                regen(out.path(), &ctk)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let run = run.wait_with_output().unwrap();
            assert!(run.status.success(), "round {round}:\n{}", stderr_of(&run));
        }
        let report = hostcb_seal::verify_paths(&[out.path().to_path_buf()]).unwrap();
        assert!(report.is_ok() && report.temporaries.is_empty(), "{report}");
    }
}

#[test]
fn regen_refuses_to_write_through_a_symbolic_link() {
    let out = crate_copy();
    let outside = tempfile::tempdir().unwrap();
    let (listed, ctk) = a_listed_target();
    let dir = out.path().join("src/bindings").join(&listed);
    // The target folder is a link to a folder outside the output, whose driver.rs is stale.
    copy_tree(&dir, outside.path());
    std::fs::remove_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(outside.path(), &dir).unwrap();
    let driver = outside.path().join("driver.rs");
    std::fs::write(&driver, "// outside, and not the generator's\n").unwrap();

    let error = one_error(&mut regen(out.path(), &ctk), REGEN);
    assert!(
        error.contains(&dir.display().to_string()) && error.contains("symbolic link"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&driver).unwrap(),
        "// outside, and not the generator's\n"
    );

    // A link in place of one file is refused as well, and left as it was.
    std::fs::remove_file(&dir).unwrap();
    copy_tree(outside.path(), &dir);
    let runtime = dir.join("runtime.rs");
    std::fs::remove_file(&runtime).unwrap();
    std::os::unix::fs::symlink(&driver, &runtime).unwrap();
    let error = one_error(&mut regen(out.path(), &ctk), REGEN);
    assert!(error.contains(&runtime.display().to_string()), "{error}");
    assert!(
        std::fs::symlink_metadata(&runtime)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_fifo_where_a_generated_file_or_the_manifest_should_be_is_an_error_not_a_hang() {
    let (listed, ctk) = a_listed_target();
    let limit = Duration::from_secs(120);
    // In place of a generated file.
    let out = crate_copy();
    let fifo = out
        .path()
        .join("src/bindings")
        .join(&listed)
        .join("driver.rs");
    mkfifo(&fifo);
    let error = one_error(&mut regen(out.path(), &ctk), limit);
    assert!(
        error.contains(&fifo.display().to_string()) && error.contains("FIFO"),
        "{error}"
    );
    // In place of `--out`'s Cargo.toml.
    let out = crate_copy();
    let manifest = out.path().join("Cargo.toml");
    mkfifo(&manifest);
    let error = one_error(&mut regen(out.path(), &ctk), limit);
    assert!(
        error.contains(&manifest.display().to_string()) && error.contains("FIFO"),
        "{error}"
    );
    // check, in a checkout whose generated file is a FIFO.
    let copy = workspace_copy();
    let fifo = copy
        .path()
        .join("generated/src/bindings")
        .join(&listed)
        .join("runtime.rs");
    mkfifo(&fifo);
    let error = one_error(&mut xtask(copy.path(), &["check", "--ctk", &ctk]), limit);
    assert!(
        error.contains(&fifo.display().to_string()) && error.contains("FIFO"),
        "{error}"
    );
}

#[test]
fn out_naming_a_file_says_it_is_not_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("Cargo.toml");
    std::fs::write(&file, "[package]\nname = \"cuda-hostcb\"\n").unwrap();
    let (_, ctk) = a_listed_target();
    let error = one_error(&mut regen(&file, &ctk), REGEN);
    assert!(
        error.contains(&format!("{} is not a folder", file.display())),
        "{error}"
    );
}

/// A copy of the checkout `base` whose files that `regen --ctk <listed>` writes are older: each
/// sealed one (the target's five, the module list, the shared types) a sealed version with one
/// line more, and `Cargo.toml` without its `newest-target` feature. Returns the copy and, by
/// path relative to `generated/`, each such file's old and new bytes.
fn stale_checkout(
    base: &Path,
    listed: &str,
) -> (tempfile::TempDir, BTreeMap<PathBuf, [Vec<u8>; 2]>) {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(base, copy.path());
    let generated = copy.path().join("generated");
    let mut files = BTreeMap::new();
    let target = Path::new(emit::BINDINGS_DIR).join(listed);
    let sealed = [emit::BINDINGS_MOD, emit::COMMON].map(PathBuf::from);
    for rel in sealed
        .into_iter()
        .chain(emit::TARGET_FILES.map(|n| target.join(n)))
    {
        let new = std::fs::read_to_string(generated.join(&rel)).unwrap();
        let ctk = hostcb_seal::check_contents(new.as_bytes()).unwrap().ctk;
        let prefix = if rel.ends_with(emit::PROVENANCE) {
            "#"
        } else {
            "//"
        };
        let (header, rest) = new.split_once('\n').unwrap();
        let (_seal, body) = rest.split_once('\n').unwrap();
        let unsealed = format!("{header}\n{body}{prefix} An older generation.\n");
        let old = hostcb_seal::seal(&unsealed, &ctk, prefix).unwrap();
        files.insert(rel, [old.into_bytes(), new.into_bytes()]);
    }
    let new = std::fs::read_to_string(generated.join("Cargo.toml")).unwrap();
    let old: String = new
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("newest-target = "))
        .collect();
    assert_ne!(old, new);
    files.insert("Cargo.toml".into(), [old.into_bytes(), new.into_bytes()]);
    for (rel, [old, _]) in &files {
        std::fs::write(generated.join(rel), old).unwrap();
    }
    (copy, files)
}

/// The temporaries under `tree` (its paths), each the start of one of the new files of `files`:
/// a staged copy, whole or cut short.
fn staged_copies(
    tree: &BTreeMap<PathBuf, Vec<u8>>,
    files: &BTreeMap<PathBuf, [Vec<u8>; 2]>,
    when: &str,
) -> Vec<PathBuf> {
    let temporaries: Vec<PathBuf> = tree
        .keys()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(TEMP_PREFIX)
        })
        .cloned()
        .collect();
    for t in &temporaries {
        assert!(
            files.values().any(|[_, new]| new.starts_with(&tree[t])),
            "{when}: the temporary {} is no staged copy",
            t.display()
        );
    }
    temporaries
}

/// A regen is killed (SIGKILL) at five points of its writing: after staging one file, after
/// staging them all, after its first, a middle and its last rename; another fails a middle
/// rename (EIO). Each time every file it writes is wholly old or wholly new, exactly those
/// renamed before the stop are new, nothing else changed but staged copies under temporary
/// names, `verify` passes and names each temporary, `check` names each file still old, and the
/// next regen writes the rest and removes the temporaries. The points are calls of the C library
/// that `output_tree/kill_at.c`, loaded into the real xtask binary, counts under `generated/`.
#[test]
fn a_regen_stopped_while_writing_leaves_whole_files_that_check_names_and_regen_repairs() {
    let (listed, ctk) = a_listed_target();
    // A checkout that lists this target alone: each round's `check` reads its headers only.
    let base = listing_copy(&[&ctk]);
    let scratch = tempfile::tempdir().unwrap();
    let (source, shim) = (
        scratch.path().join("kill_at.c"),
        scratch.path().join("kill_at.so"),
    );
    std::fs::write(&source, include_str!("output_tree/kill_at.c")).unwrap();
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .args([&shim, &source])
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr_of(&built));

    struct Round {
        copy: tempfile::TempDir,
        files: BTreeMap<PathBuf, [Vec<u8>; 2]>,
        before: BTreeMap<PathBuf, Vec<u8>>,
        out: Output,
        log: String,
    }
    // `regen --ctk <listed>` of a stale checkout, stopped at the `at`-th counted call (0: never).
    let regen = |at: usize, how: &str| {
        let (copy, files) = stale_checkout(base.path(), &listed);
        let generated = copy.path().join("generated").canonicalize().unwrap();
        let before = files_under(&generated);
        let log = scratch.path().join(format!("{at}-{how}.log"));
        let mut cmd = xtask(copy.path(), &["regen", "--ctk", &ctk]);
        cmd.env("LD_PRELOAD", &shim)
            .env("KILL_UNDER", &generated)
            .env("KILL_LOG", &log)
            .env("KILL_AT", at.to_string())
            .env("KILL_HOW", how);
        let out = output_within(&mut cmd, REGEN);
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        Round {
            copy,
            files,
            before,
            out,
            log,
        }
    };
    let generated = |round: &Round| round.copy.path().join("generated").canonicalize().unwrap();
    // What a stopped run left, once `renamed` files were renamed into place: the rest old, and
    // staged copies; `verify` passes, `check` names the old files, and a regen repairs it all.
    let assert_repairs = |round: &Round, renamed: usize, when: &str| {
        let root = generated(round);
        let tree = files_under(&root);
        let temporaries = staged_copies(&tree, &round.files, when);
        let mut old = Vec::new();
        for (rel, [was, new]) in &round.files {
            assert!(
                tree[rel] == *was || tree[rel] == *new,
                "{when}: {} is neither the old file nor the new one",
                rel.display()
            );
            if tree[rel] == *was {
                old.push(rel);
            }
        }
        assert_eq!(
            round.files.len() - old.len(),
            renamed,
            "{when}: old: {old:?}"
        );
        for (rel, bytes) in &round.before {
            assert!(
                round.files.contains_key(rel) || tree.get(rel) == Some(bytes),
                "{when}: {} changed",
                rel.display()
            );
        }
        assert_eq!(
            tree.len(),
            round.before.len() + temporaries.len(),
            "{when}: {:?}",
            tree.keys()
        );

        let verify = output_within(&mut xtask(round.copy.path(), &["verify"]), REGEN);
        let text = stderr_of(&verify);
        assert!(verify.status.success(), "{when}: verify failed:\n{text}");
        for t in &temporaries {
            let skipped = format!(
                "skipped {}: a temporary file left by an interrupted regen",
                root.join(t).display()
            );
            assert!(
                text.contains(&skipped),
                "{when}: verify does not name {}:\n{text}",
                t.display()
            );
        }
        let mut cmd = xtask(round.copy.path(), &["check", "--ctk", &ctk]);
        let check = output_within(&mut cmd, REGEN);
        let text = stderr_of(&check);
        if old.is_empty() {
            assert!(check.status.success(), "{when}: check failed:\n{text}");
        } else {
            let error = the_one_error(&cmd, &check);
            let stale = format!(
                "{} generated file(s) are stale; run: cargo xtask regen --ctk",
                old.len()
            );
            assert!(error.contains(&stale), "{when}: {error}");
            for rel in &old {
                let named = format!(
                    "--- {} differs from what the generator produces now",
                    rel.display()
                );
                assert!(
                    text.contains(&named),
                    "{when}: check does not name {}:\n{text}",
                    rel.display()
                );
            }
        }

        let mut expected = round.before.clone();
        for (rel, [_, new]) in &round.files {
            expected.insert(rel.clone(), new.clone());
        }
        // A tree the run left whole (every file new, no staged copy) has nothing to repair.
        if !(old.is_empty() && temporaries.is_empty()) {
            succeeds(&mut xtask(round.copy.path(), &["regen", "--ctk", &ctk]));
        }
        let repaired = files_under(&root);
        assert!(
            repaired == expected,
            "{when}: the tree is not new (after a repairing regen where one was needed): {:?}",
            crate::fixture::changed(&expected, &repaired)
        );
    };

    // A whole run, counted: it stages every file it writes, then renames each into place.
    let whole = regen(0, "");
    assert!(whole.out.status.success(), "{}", stderr_of(&whole.out));
    // Each counted call and its path, relative to `generated/`.
    let calls: Vec<(&str, &Path)> = whole
        .log
        .lines()
        .map(|l| {
            let (_, call) = l.split_once(' ').unwrap();
            let (kind, path) = call.split_once(' ').unwrap();
            (
                kind,
                Path::new(path).strip_prefix(generated(&whole)).unwrap(),
            )
        })
        .collect();
    let n = whole.files.len();
    assert!(
        calls.len() >= n,
        "the shim counted {} calls for {n} files written: does the writer still go through the C library's open and rename? {calls:#?}",
        calls.len()
    );
    assert_repairs(&whole, n, "a whole run");
    // The files a run stopped after its `at`-th call has replaced.
    let renamed = |at: usize| {
        calls[..at]
            .iter()
            .filter(|(kind, _)| *kind == "rename")
            .count()
    };
    let first_rename = calls.iter().position(|(kind, _)| *kind == "rename");
    let staged = first_rename.unwrap_or(calls.len());
    let middle = (staged + 1 + calls.len()) / 2;

    // Killed after staging one file, after staging all, after the first rename, a middle one, and
    // the last call.
    let mut points = vec![1, staged, staged + 1, middle, calls.len()];
    points.retain(|at| (1..=calls.len()).contains(at));
    points.dedup();
    for at in points {
        let round = regen(at, "kill");
        let (kind, path) = calls[at - 1];
        let when = format!("killed after {kind} {}", path.display());
        assert_eq!(
            round.out.status.signal(),
            Some(9),
            "{when}: not killed:\n{}",
            stderr_of(&round.out)
        );
        assert_repairs(&round, renamed(at), &when);
    }

    // A middle rename fails.
    let (kind, path) = calls[middle - 1];
    assert_eq!(kind, "rename", "{calls:#?}");
    let round = regen(middle, "fail");
    let when = format!("rename to {} failing", path.display());
    let error = the_one_error(&when, &round.out);
    assert!(
        error.contains(&format!(
            "cannot write {}: ",
            generated(&round).join(path).display()
        )) && error.contains(
            "regen stopped midway, so the files it replaced before this one are new and the others old"
        ),
        "{when}: {error}"
    );
    assert_repairs(&round, renamed(middle - 1), &when);
}
