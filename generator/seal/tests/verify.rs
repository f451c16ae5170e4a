//! Verifying trees of files, with and without git.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use hostcb_seal::{
    Problem, SealProblem, VerifyError, VerifyOptions, marker, seal, verify_paths, verify_paths_with,
};

fn write(path: &Path, contents: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

fn sealed(body: &str) -> String {
    seal(
        &format!("// @generated, do not edit\n{body}\n"),
        "12.9",
        "//",
    )
    .unwrap()
}

/// Drops the seal line, as a careless hand edit would.
fn strip_seal(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|line| !line.contains(marker()))
        .collect()
}

/// Runs git in `dir` with a fixed identity, failing the test if git fails.
fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
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

/// A tree with sealed, edited, hand-written and skipped files.
fn mixed_tree(root: &Path) {
    write(&root.join("gen/a.rs"), &sealed("pub fn a() {}"));
    write(
        &root.join("gen/b.rs"),
        &sealed("pub fn b() {}").replace("fn b", "fn b2"),
    );
    write(
        &root.join("gen/sub/c.toml"),
        &seal("# @generated\n[c]\n", "all", "#").unwrap(),
    );
    write(&root.join("hand.rs"), "fn main() {}\n");
    write(&root.join("gen/notes.md"), "hand-written notes\n");
    let edited = sealed("pub fn t() {}").replace("fn t", "fn t2");
    write(&root.join("target/debug/t.rs"), &edited);
    write(&root.join("gen/target/t.rs"), &edited);
    write(&root.join(".hidden/h.rs"), &edited);
}

#[test]
fn verifies_a_mixed_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mixed_tree(root);

    let report = verify_paths(&[root.to_owned()]).unwrap();
    assert_eq!(
        report.checked,
        [
            root.join("gen/a.rs"),
            root.join("gen/b.rs"),
            root.join("gen/sub/c.toml")
        ]
    );
    assert_eq!(
        report.hand_written,
        [root.join("gen/notes.md"), root.join("hand.rs")]
    );
    assert!(!report.is_ok());
    assert_eq!(report.failures.len(), 1, "{report}");
    let failure = &report.failures[0];
    assert_eq!(failure.path, root.join("gen/b.rs"));
    assert!(matches!(
        failure.problem,
        Problem::Seal(SealProblem::Mismatch { .. })
    ));
    let line = failure.to_string();
    assert!(
        line.starts_with(&format!(
            "{}: edited after sealing: recorded sha256 ",
            root.join("gen/b.rs").display()
        )),
        "{line}"
    );
    assert!(
        line.ends_with("; regenerate with cargo xtask regen"),
        "{line}"
    );
    // A temporary directory is not in a git work tree: the lost-seal check is noted as skipped.
    assert_eq!(report.notes.len(), 1, "{report}");
    assert!(
        report.notes[0].contains("not in a git work tree"),
        "{report}"
    );
    let text = report.to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.ends_with("3 sealed file(s) checked, 2 hand-written file(s) skipped, 1 failure(s)"),
        "{text}"
    );
}

#[test]
fn explicit_files_are_checked_even_in_skipped_directories() {
    let dir = tempfile::tempdir().unwrap();
    mixed_tree(dir.path());
    let paths = [
        dir.path().join("gen/a.rs"),
        dir.path().join("target/debug/t.rs"),
    ];
    let options = VerifyOptions {
        regen_command: "make regen".to_owned(),
    };
    let report = verify_paths_with(&paths, &options).unwrap();
    assert_eq!(report.checked, paths);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].path, paths[1]);
    assert_eq!(report.failures[0].fix, "regenerate with make regen");
    assert!(
        report.notes.is_empty(),
        "no hand-written files, no git: {report}"
    );
}

#[test]
fn a_clean_tree_is_ok() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a.rs"), &sealed("pub fn a() {}"));
    let report = verify_paths(&[dir.path().to_owned()]).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.checked.len(), 1);
}

#[test]
fn a_missing_path_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let error = verify_paths(std::slice::from_ref(&missing)).unwrap_err();
    assert!(matches!(&error, VerifyError::Io { path, .. } if *path == missing));
    assert!(error.to_string().starts_with("cannot read "), "{error}");
}

/// A repository whose HEAD has `gen/x.rs` sealed and `hand.rs` hand-written.
fn committed_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    write(&root.join("gen/x.rs"), &sealed("pub fn x() {}"));
    write(&root.join("gen/y.rs"), &sealed("pub fn y() {}"));
    write(&root.join("hand.rs"), "fn main() {}\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "sealed files"]);
    dir
}

#[test]
fn a_committed_sealed_file_that_lost_its_seal_fails() {
    let dir = committed_repo();
    let root = dir.path();
    let x = root.join("gen/x.rs");

    let before = verify_paths(&[root.to_owned()]).unwrap();
    assert!(before.is_ok(), "{before}");
    assert!(before.notes.is_empty(), "{before}");

    fs::write(&x, strip_seal(&fs::read_to_string(&x).unwrap())).unwrap();
    for paths in [
        vec![root.to_owned()],
        vec![root.join("gen")],
        vec![x.clone()],
        vec![root.join("hand.rs"), root.join("gen")],
    ] {
        let report = verify_paths(&paths).unwrap();
        assert!(report.notes.is_empty(), "{paths:?}: {report}");
        assert_eq!(report.failures.len(), 1, "{paths:?}: {report}");
        let failure = &report.failures[0];
        assert_eq!(failure.path, x);
        assert_eq!(failure.problem, Problem::LostSeal);
        let line = failure.to_string();
        assert!(
            line.starts_with(&format!("{}: lost its seal", x.display())),
            "{line}"
        );
        assert!(line.contains("regenerate with cargo xtask regen"), "{line}");
    }

    // Once the unsealed file is committed, it is hand-written.
    git(root, &["commit", "-q", "-a", "-m", "x is hand-written now"]);
    let after = verify_paths(&[root.to_owned()]).unwrap();
    assert!(after.is_ok(), "{after}");
    assert_eq!(after.hand_written, [x, root.join("hand.rs")]);
}

#[test]
fn a_repository_without_commits_is_noted() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    write(&dir.path().join("hand.rs"), "fn main() {}\n");
    let report = verify_paths(&[dir.path().to_owned()]).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.notes.len(), 1, "{report}");
    assert!(report.notes[0].contains("`git grep` failed"), "{report}");
}

/// `path` spelled relative to the current directory (`../..` up to the root, then down).
fn relative_to_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
    let path = path.canonicalize().unwrap();
    let mut relative: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
    relative.extend(path.components().skip(1));
    relative
}

#[test]
fn relative_paths_find_their_repository() {
    let dir = committed_repo();
    let x = dir.path().join("gen/x.rs");
    fs::write(&x, strip_seal(&fs::read_to_string(&x).unwrap())).unwrap();
    let relative = relative_to_cwd(&dir.path().join("gen"));
    assert!(relative.is_relative());
    let report = verify_paths(std::slice::from_ref(&relative)).unwrap();
    assert_eq!(report.failures.len(), 1, "{report}");
    assert_eq!(report.failures[0].path, relative.join("x.rs"));
    assert_eq!(report.failures[0].problem, Problem::LostSeal);
}
