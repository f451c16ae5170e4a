//! `cargo xtask regen --out DIR`: a whole tree written elsewhere (a backport checkout), sealed,
//! and a second run that writes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hostcb_generator::Ctk;
use hostcb_generator::emit;

use crate::fixture::{HUNG, crate_folder, output_within, stderr_of, succeeds, workspace, xtask};

/// `cargo xtask <args>`, run in this checkout.
fn run(args: &[&str]) -> Output {
    output_within(&mut xtask(&workspace(), args), HUNG)
}

/// `regen --ctk 12.9 --out <out>`, run in this checkout.
fn regen_12_9(out: &Path) -> Command {
    xtask(
        &workspace(),
        &["regen", "--ctk", "12.9", "--out", out.to_str().unwrap()],
    )
}

fn run_regen(out: &Path) -> Output {
    output_within(&mut regen_12_9(out), HUNG)
}

/// [`run_regen`], which must succeed; its standard error.
fn regen(out: &Path) -> String {
    succeeds(&mut regen_12_9(out))
}

#[test]
fn out_refuses_a_folder_that_is_not_the_generated_crate() {
    // The checkout's root, an empty folder, another crate's folder: none gets a stray src/.
    let empty = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join("Cargo.toml"),
        "[package]\nname = \"something-else\"\n",
    )
    .unwrap();
    let root = workspace();
    for dir in [root.as_path(), empty.path(), other.path()] {
        let before = dir.join("src/bindings").exists();
        let run = run_regen(dir);
        let stderr = stderr_of(&run);
        assert!(!run.status.success(), "{}: {stderr}", dir.display());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("is not the folder of the generated crate"),
            "{stderr}"
        );
        assert_eq!(
            dir.join("src/bindings").exists(),
            before,
            "{}",
            dir.display()
        );
    }
}

#[test]
fn regen_into_another_tree_twice() {
    let out = crate_folder();
    let first = regen(out.path());
    assert!(
        first.contains("regen: 8 files, 7 written, 1 unchanged, 0 deleted"),
        "{first}"
    );
    let dir = out.path().join("src/bindings/ctk_12_9");
    for name in emit::TARGET_FILES {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    assert!(out.path().join(emit::BINDINGS_MOD).is_file());
    // What regen wrote is what verify expects of the target.
    let expected: Vec<PathBuf> = emit::sealed_files(&[Ctk::V12_9])
        .into_iter()
        .filter(|f| f.starts_with(emit::target_dir(Ctk::V12_9)))
        .collect();
    let options = hostcb_seal::VerifyOptions::default();
    let report = hostcb_seal::verify_tree(out.path(), &expected, &options).unwrap();
    assert!(report.is_ok() && report.checked.len() == 7, "{report}");
    // No temporary file is left behind.
    assert!(temporaries(&dir).is_empty(), "{:?}", temporaries(&dir));

    // A regen killed while writing leaves a temporary file: verify skips it with a note, and the
    // next regen removes it.
    let driver = std::fs::read(dir.join("driver.rs")).unwrap();
    let stale = dir.join(format!("{}Ab12Cd", emit::tree::TEMP_PREFIX));
    std::fs::write(&stale, &driver[..driver.len() / 2]).unwrap();
    let report = hostcb_seal::verify_tree(out.path(), &expected, &options).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.temporaries, [stale], "{report}");
    let second = regen(out.path());
    assert!(
        second.contains("regen: 8 files, 0 written, 8 unchanged, 0 deleted"),
        "{second}"
    );
    assert!(temporaries(&dir).is_empty(), "{:?}", temporaries(&dir));
}

/// The names of the temporary files in `dir`.
fn temporaries(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(emit::tree::TEMP_PREFIX))
        .collect()
}

/// `--out` writes a tree for that tree's own target list, and refuses a target it lacks in one
/// line, writing nothing: the list of its checkout (`<checkout>/generated` beside
/// `<checkout>/generator/targets.txt`), else the `ctk-*` features of the folder's Cargo.toml.
#[test]
fn out_writes_for_the_trees_own_target_list() {
    let checkout = tempfile::tempdir().unwrap();
    let generated = checkout.path().join("generated");
    std::fs::create_dir_all(&generated).unwrap();
    std::fs::create_dir_all(checkout.path().join("generator")).unwrap();
    std::fs::copy(
        workspace().join("generated/Cargo.toml"),
        generated.join("Cargo.toml"),
    )
    .unwrap();
    let list = checkout.path().join("generator/targets.txt");
    std::fs::write(&list, "12.9\n").unwrap();
    let out = generated.to_str().unwrap();

    let refused = run(&["regen", "--ctk", "13.0", "--out", out]);
    let stderr = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let list = list.canonicalize().unwrap();
    assert!(
        stderr.contains(&format!(
            "CTK 13.0 is not a target of the tree at {out}: {} lists 12.9; add 13.0 to {}",
            list.display(),
            list.display()
        )) && stderr.contains("(nothing was written)"),
        "{stderr}"
    );
    assert!(!generated.join("src").exists(), "the refusal wrote files");

    let wrote = regen(&generated);
    assert!(
        wrote.contains("regen: 8 files, 8 written, 0 unchanged, 0 deleted"),
        "{wrote}"
    );
    let module_list = std::fs::read_to_string(generated.join(emit::BINDINGS_MOD)).unwrap();
    assert!(module_list.contains("pub mod ctk_12_9;"), "{module_list}");
    for other in ["13.0", "13.5"] {
        let ctk: Ctk = other.parse().unwrap();
        for names in [
            format!("pub mod {};", ctk.module()),
            format!("feature = \"{}\"", ctk.feature()),
            format!("| {other} |"),
        ] {
            assert!(!module_list.contains(&names), "{names}:\n{module_list}");
        }
    }
    assert!(
        module_list.contains("| function | 12.9 |\n"),
        "{module_list}"
    );
    let manifest = std::fs::read_to_string(generated.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(
            "ctk-12-9 = []\nall-targets = [\"ctk-12-9\"]\nnewest-target = [\"ctk-12-9\"]\n"
        ) && !manifest.contains("ctk-13-0"),
        "{manifest}"
    );
    // What regen wrote is all that verify expects of a tree listing 12.9.
    let report = hostcb_seal::verify_tree(
        &generated,
        &emit::sealed_files(&[Ctk::V12_9]),
        &hostcb_seal::VerifyOptions::default(),
    )
    .unwrap();
    assert!(report.is_ok() && report.checked.len() == 7, "{report}");

    // A crate folder in no checkout: the features of its Cargo.toml are its list.
    let bare = tempfile::tempdir().unwrap();
    std::fs::copy(generated.join("Cargo.toml"), bare.path().join("Cargo.toml")).unwrap();
    let refused = run(&[
        "regen",
        "--ctk",
        "13.5",
        "--out",
        bare.path().to_str().unwrap(),
    ]);
    let stderr = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("the generated features of")
            && stderr
                .contains("lists 12.9; add the line `ctk-13-5 = []` to the generated features of"),
        "{stderr}"
    );
    regen(bare.path());
    assert_eq!(
        std::fs::read(bare.path().join(emit::BINDINGS_MOD)).unwrap(),
        module_list.as_bytes(),
        "the same list gives the same module list"
    );
}

/// Regen runs nothing that the caller's `PATH` names `clang` or `llvm-config`. bindgen, unless
/// told not to, looks for a clang (asking `llvm-config`, then `PATH`) and runs it to add its system
/// include folders after the generator's own: the output would then depend on what the machine
/// has installed, and each parse would run whatever answers to those names.
#[test]
fn regen_runs_no_clang_or_llvm_config_from_path() {
    use std::os::unix::fs::PermissionsExt;
    let out = crate_folder();
    let bin = tempfile::tempdir().unwrap();
    let ran = bin.path().join("ran");
    for name in ["clang", "llvm-config"] {
        let script = bin.path().join(name);
        let body = format!(
            "#!/bin/sh\necho {name} \"$@\" >> '{}'\nexit 1\n",
            ran.display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(bin.path().to_path_buf()).chain(std::env::split_paths(&path)),
    )
    .unwrap();
    succeeds(regen_12_9(out.path()).env("PATH", path));
    let ran = std::fs::read_to_string(&ran).unwrap_or_default();
    assert!(ran.is_empty(), "regen ran:\n{ran}");
}

/// What bindgen, libclang and gcc would read of the environment on their own (bindgen's extra
/// clang arguments and target, the include folders clang and gcc search before their own) is
/// removed, with a warning each: `check` still finds every committed file made from the pinned
/// inputs. Before, a `stdlib.h` in `CPATH` was read in place of the system's.
#[test]
fn the_compilers_environment_changes_nothing() {
    let poison = tempfile::tempdir().unwrap();
    for header in ["stdlib.h", "stddef.h", "limits.h"] {
        std::fs::write(poison.path().join(header), "#error read from CPATH\n").unwrap();
    }
    let stderr = succeeds(
        xtask(&workspace(), &["check"])
            .env("CPATH", poison.path())
            .env("C_INCLUDE_PATH", poison.path())
            .env("BINDGEN_EXTRA_CLANG_ARGS", "-include /nonexistent/poison.h")
            .env(
                "BINDGEN_EXTRA_CLANG_ARGS_x86_64-unknown-linux-gnu",
                "-DCUresult=int",
            )
            .env("TARGET", "aarch64-unknown-linux-gnu"),
    );
    assert!(
        stderr.contains("generated files match the committed ones"),
        "{stderr}"
    );
    for name in [
        "BINDGEN_EXTRA_CLANG_ARGS",
        "BINDGEN_EXTRA_CLANG_ARGS_x86_64-unknown-linux-gnu",
        "CPATH",
        "C_INCLUDE_PATH",
        "TARGET",
    ] {
        assert!(
            stderr.contains(&format!("warning: ignoring {name} of the environment")),
            "{name}: {stderr}"
        );
    }
}

/// What the xtask removes of the environment it gives back to the cargo it runs: cargo rebuilds
/// bindgen when a variable its build script names changes, so a cargo run without it would
/// rebuild bindgen, and the next `cargo xtask` (with it) rebuild it again.
#[test]
fn the_cargo_the_xtask_runs_gets_the_environment_it_was_given() {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("seen");
    let cargo = bin.path().join("cargo");
    let body = format!(
        "#!/bin/sh\necho \"[$BINDGEN_EXTRA_CLANG_ARGS] [$CPATH]\" > '{}'\n",
        seen.display()
    );
    std::fs::write(&cargo, body).unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let stderr = succeeds(
        xtask(&workspace(), &["loom"])
            .env("CARGO", &cargo)
            .env("BINDGEN_EXTRA_CLANG_ARGS", "-DX")
            .env("CPATH", bin.path()),
    );
    assert!(stderr.contains("warning: ignoring CPATH"), "{stderr}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen.trim(), format!("[-DX] [{}]", bin.path().display()));
}
