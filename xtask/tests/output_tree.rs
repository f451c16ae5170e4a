//! What regen and check may do to the output tree, run with the real xtask binary and the real
//! pinned inputs on a copy of the generated crate (`regen --out`): delete only files they can
//! prove they wrote, survive a killed or overlapping run, never write through a symbolic link,
//! and never open a FIFO where a file should be.

mod fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn workspace() -> PathBuf {
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

/// A copy of the generated crate (its manifest and sources), as a backport checkout has it.
fn crate_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let here = workspace().join("generated");
    std::fs::copy(here.join("Cargo.toml"), dir.path().join("Cargo.toml")).unwrap();
    copy_tree(&here.join("src"), &dir.path().join("src"));
    dir
}

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

/// Runs the xtask in the checkout at `cwd`, reading the tests' input cache; kills it and
/// fails the test after `limit` (a hang is a failure, not a stuck test run).
fn xtask(args: &[&str], cwd: &Path, limit: Duration) -> Output {
    let cache = fixture::cache();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(cwd)
        .env_remove("CARGO_MANIFEST_DIR")
        .env("HOSTCB_INPUTS_CACHE", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run xtask");
    let started = Instant::now();
    while child.try_wait().expect("wait for xtask").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "xtask {args:?} still ran after {limit:?} (hung?); killed it. stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("collect xtask output")
}

fn regen(out: &Path, ctk: &str) -> Output {
    let out = out.to_str().unwrap();
    xtask(
        &["regen", "--ctk", ctk, "--out", out],
        &workspace(),
        Duration::from_secs(300),
    )
}

fn succeeds(run: Output) -> String {
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stderr}");
    stderr
}

/// The one `error:` line of a failed run.
fn one_error(run: Output) -> String {
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(!run.status.success(), "it succeeded:\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert_eq!(stderr.lines().last(), errors.first().copied(), "{stderr}");
    errors[0].to_owned()
}

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

    let stderr = succeeds(regen(out.path(), "all"));
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

    let stderr = succeeds(regen(out.path(), "all"));
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
    let path = out.path().to_str().unwrap().to_owned();
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
                Command::new(env!("CARGO_BIN_EXE_xtask"))
                    .args(["regen", "--ctk", "all", "--out", &path])
                    .current_dir(workspace())
                    .env_remove("CARGO_MANIFEST_DIR")
                    .env("HOSTCB_INPUTS_CACHE", fixture::cache())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let run = run.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(run.status.success(), "round {round}:\n{stderr}");
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

    let error = one_error(regen(out.path(), &ctk));
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
    let error = one_error(regen(out.path(), &ctk));
    assert!(error.contains(&runtime.display().to_string()), "{error}");
    assert!(
        std::fs::symlink_metadata(&runtime)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
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
    let o = out.path().to_str().unwrap();
    let error = one_error(xtask(
        &["regen", "--ctk", &ctk, "--out", o],
        &workspace(),
        limit,
    ));
    assert!(
        error.contains(&fifo.display().to_string()) && error.contains("FIFO"),
        "{error}"
    );
    // In place of `--out`'s Cargo.toml.
    let out = crate_copy();
    let manifest = out.path().join("Cargo.toml");
    mkfifo(&manifest);
    let o = out.path().to_str().unwrap();
    let error = one_error(xtask(
        &["regen", "--ctk", &ctk, "--out", o],
        &workspace(),
        limit,
    ));
    assert!(
        error.contains(&manifest.display().to_string()) && error.contains("FIFO"),
        "{error}"
    );
    // check, in a checkout whose generated file is a FIFO.
    let copy = tempfile::tempdir().unwrap();
    let here = workspace();
    for file in [
        "Cargo.toml",
        "generator/targets.txt",
        "generator/inputs.lock",
    ] {
        std::fs::create_dir_all(copy.path().join(file).parent().unwrap()).unwrap();
        std::fs::copy(here.join(file), copy.path().join(file)).unwrap();
    }
    for dir in ["generator/allowlist", "templates", "generated"] {
        copy_tree(&here.join(dir), &copy.path().join(dir));
    }
    let fifo = copy
        .path()
        .join("generated/src/bindings")
        .join(&listed)
        .join("runtime.rs");
    mkfifo(&fifo);
    let error = one_error(xtask(&["check", "--ctk", &ctk], copy.path(), limit));
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
    let error = one_error(regen(&file, &ctk));
    assert!(
        error.contains(&format!("{} is not a folder", file.display())),
        "{error}"
    );
}
