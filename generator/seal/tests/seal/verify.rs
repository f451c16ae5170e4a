//! Verifying trees of files, with and without git.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use hostcb_seal::{
    Problem, SealProblem, VerifyError, VerifyOptions, VerifyRoot, marker, seal, verify_paths,
    verify_paths_with, verify_roots, verify_tree,
};

use crate::{git, write};

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
    // No folder names the target: the fix names the one the seal records.
    assert!(
        line.ends_with("; regenerate with the generator that wrote it (target 12.9)"),
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
        ..VerifyOptions::default()
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
        assert!(
            line.contains("regenerate with the generator that wrote it (target all)"),
            "{line}"
        );
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

/// Runs `f` on another thread and fails the test if it has not returned within `seconds`:
/// verify must never block on a FIFO, so a regression fails here rather than hanging.
fn within<T: Send + 'static>(seconds: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    receive
        .recv_timeout(std::time::Duration::from_secs(seconds))
        .unwrap_or_else(|_| panic!("verify did not return within {seconds} s (blocked on a FIFO?)"))
}

/// Makes a FIFO at `path` with `mkfifo`.
#[cfg(unix)]
fn mkfifo(path: &Path) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("these tests need `mkfifo` on PATH");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The one failure of `report`, as the line verify prints.
fn only_failure(report: &hostcb_seal::VerifyReport) -> String {
    assert_eq!(report.failures.len(), 1, "{report}");
    report.failures[0].to_string()
}

#[cfg(unix)]
#[test]
fn a_sealed_file_replaced_by_a_symlink_to_an_edited_copy_fails() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    write(&root.join("ctk_12_9/a.rs"), &sealed("pub fn a() {}"));
    // The copy is edited and sealed again, so it checks on its own.
    let copy = dir.path().join("elsewhere/a.rs");
    write(&copy, &sealed("pub fn a() { evil() }"));
    let link = root.join("ctk_12_9/b.rs");
    std::os::unix::fs::symlink(&copy, &link).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("linked")).unwrap();

    let report = verify_paths(std::slice::from_ref(&root)).unwrap();
    assert_eq!(report.failures.len(), 2, "{report}");
    let lines: Vec<String> = report.failures.iter().map(|f| f.to_string()).collect();
    assert!(
        lines[0].starts_with(&format!("{}: is a symbolic link", link.display())),
        "{report}"
    );
    assert!(lines[0].contains("(target 12.9)"), "{report}");
    assert!(
        lines[1].starts_with(&format!(
            "{}: is a symbolic link",
            root.join("linked").display()
        )),
        "{report}"
    );
    // Named directly, the link fails too.
    let line = only_failure(&verify_paths(std::slice::from_ref(&link)).unwrap());
    assert!(line.contains("is a symbolic link"), "{line}");
}

#[cfg(unix)]
#[test]
fn a_fifo_or_socket_in_the_tree_fails_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    write(&root.join("ctk_12_9/a.rs"), &sealed("pub fn a() {}"));
    let fifo = root.join("ctk_12_9/driver.rs");
    mkfifo(&fifo);
    let socket = root.join("ctk_12_9/s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();

    let report = within(10, move || verify_paths(&[root]).unwrap());
    assert_eq!(report.failures.len(), 2, "{report}");
    assert_eq!(report.failures[0].path, fifo);
    assert!(
        report.failures[0].to_string().contains("is a FIFO"),
        "{report}"
    );
    assert_eq!(report.failures[1].path, socket);
    assert!(
        report.failures[1].to_string().contains("is a socket"),
        "{report}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_or_device_given_directly_fails_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ctk_13_0/driver.rs");
    mkfifo(&fifo);
    let paths = vec![fifo.clone(), PathBuf::from("/dev/null")];
    let report = within(10, move || verify_paths(&paths).unwrap());
    assert_eq!(report.failures.len(), 2, "{report}");
    // Failures come in path order.
    let line = report.failures[0].to_string();
    assert!(
        line.starts_with("/dev/null: is a character device"),
        "{line}"
    );
    let line = report.failures[1].to_string();
    assert!(
        line.starts_with(&format!("{}: is a FIFO", fifo.display())),
        "{line}"
    );
    assert!(line.contains("(target 13.0)"), "{line}");
}

#[test]
fn a_seal_for_another_target_fails_in_a_target_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let for_13_0 = |body: &str| {
        seal(
            &format!("// @generated, do not edit\n{body}\n"),
            "13.0",
            "//",
        )
        .unwrap()
    };
    write(
        &root.join("src/ctk_13_0/driver.rs"),
        &for_13_0("pub fn d() {}"),
    );
    write(
        &root.join("src/ctk_12_9/driver.rs"),
        &for_13_0("pub fn d() {}"),
    );
    write(
        &root.join("src/ctk_12_9/provenance.toml"),
        &seal("# @generated\n[x]\n", "all", "#").unwrap(),
    );
    write(&root.join("src/other/x.rs"), &for_13_0("pub fn x() {}"));

    let report = verify_paths(std::slice::from_ref(&root)).unwrap();
    assert_eq!(report.failures.len(), 2, "{report}");
    let line = report.failures[0].to_string();
    assert!(
        line.starts_with(&format!(
            "{}: sealed for ctk=13.0, but its folder ctk_12_9 holds ctk=12.9",
            root.join("src/ctk_12_9/driver.rs").display()
        )),
        "{line}"
    );
    assert!(
        line.ends_with("regenerate with the generator that wrote it (target 12.9)"),
        "{line}"
    );
    assert_eq!(
        report.failures[1].path,
        root.join("src/ctk_12_9/provenance.toml")
    );
    assert!(
        report.failures[1]
            .to_string()
            .contains("sealed for ctk=all"),
        "{report}"
    );
}

#[test]
fn a_deleted_committed_sealed_file_fails() {
    let dir = committed_repo();
    let root = dir.path();
    let x = root.join("gen/x.rs");
    fs::remove_file(&x).unwrap();
    for paths in [vec![root.to_owned()], vec![root.join("gen")]] {
        let report = verify_paths(&paths).unwrap();
        let line = only_failure(&report);
        assert_eq!(report.failures[0].path, x);
        assert!(
            line.starts_with(&format!("{}: is missing", x.display())),
            "{line}"
        );
        assert!(line.contains("HEAD"), "{line}");
    }
    // A deletion that is committed is meant.
    git(root, &["commit", "-q", "-a", "-m", "x is gone"]);
    let after = verify_paths(&[root.to_owned()]).unwrap();
    assert!(after.is_ok(), "{after}");
}

#[test]
fn leftover_regen_temporaries_are_skipped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let full = sealed("pub fn a() {}");
    write(&root.join("ctk_12_9/a.rs"), &full);
    // A regen killed halfway through writing its temporary file.
    let temp = root.join("ctk_12_9/.regen-Ab12Cd");
    write(&temp, &full[..full.len() - 4]);

    let report = verify_paths(std::slice::from_ref(&root)).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.checked, [root.join("ctk_12_9/a.rs")]);
    assert!(
        report
            .notes
            .iter()
            .any(|note| note.contains(&temp.display().to_string())
                && note.contains("interrupted regen")),
        "{report}"
    );
}

#[test]
fn a_missing_expected_file_fails() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    write(&root.join("ctk_12_9/driver.rs"), &sealed("pub fn d() {}"));
    write(&root.join("ctk_12_9/notes.rs"), "// hand-written\n");
    let expected: Vec<PathBuf> = [
        "ctk_12_9/driver.rs",
        "ctk_12_9/runtime.rs",
        "ctk_12_9/notes.rs",
        "ctk_13_0/driver.rs",
    ]
    .map(PathBuf::from)
    .to_vec();

    let report = verify_tree(&root, &expected, &VerifyOptions::default()).unwrap();
    let lines: Vec<String> = report.failures.iter().map(|f| f.to_string()).collect();
    assert_eq!(lines.len(), 3, "{report}");
    assert_eq!(
        lines[0],
        format!(
            "{}: has no seal line (no `{}` line); regenerate with the generator that wrote it (target 12.9)",
            root.join("ctk_12_9/notes.rs").display(),
            marker()
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "{}: is missing: it is one of the sealed files expected here; \
             regenerate with the generator that wrote it (target 12.9)",
            root.join("ctk_12_9/runtime.rs").display()
        )
    );
    assert_eq!(report.failures[2].path, root.join("ctk_13_0/driver.rs"));
    assert_eq!(report.failures[2].problem, Problem::Missing);
    assert!(lines[2].ends_with("(target 13.0)"), "{report}");
    assert_eq!(
        report.checked,
        [
            root.join("ctk_12_9/driver.rs"),
            root.join("ctk_12_9/notes.rs")
        ]
    );

    // The expectation belongs to its root: the same folder named without it passes.
    let report = verify_roots(
        &[
            VerifyRoot::new(root.join("ctk_12_9")),
            VerifyRoot::new(&root).expecting(["ctk_12_9/driver.rs"]),
        ],
        &VerifyOptions::default(),
    )
    .unwrap();
    assert!(report.is_ok(), "{report}");
}
