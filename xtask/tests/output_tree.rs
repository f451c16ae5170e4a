//! What regen and check may do to the output tree, run with the real xtask binary and the real
//! pinned inputs on a copy of the generated crate (`regen --out`): delete only files they can
//! prove they wrote, survive a killed or overlapping run, never write through a symbolic link,
//! and never open a FIFO where a file should be.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::fixture::{
    copy_tree, crate_copy, mkfifo, one_error, stderr_of, succeeds, workspace, workspace_copy, xtask,
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
    for round in 0..3 {
        // An edit in each round, so that both runs have files to write.
        let (listed, _) = a_listed_target();
        let file = out
            .path()
            .join("src/bindings")
            .join(&listed)
            .join("driver.rs");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replacen("pub ", "pub  ", 1)).unwrap();
        let runs: Vec<_> = (0..2)
            .map(|_| {
                regen(out.path(), "all")
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
