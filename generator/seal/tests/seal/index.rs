//! Verifying git's index (`Source::Index`) through the library: what is staged is checked, not
//! the work tree; links, skipped folders, expected files and repositories that are not there.

use std::fs;

use hostcb_seal::{Problem, SealProblem, Source, VerifyError, VerifyOptions, VerifyRoot, seal};

use crate::{git, write};

fn sealed(body: &str) -> String {
    seal(&format!("// @generated\n{body}\n"), "12.9", "//").unwrap()
}

fn staged() -> VerifyOptions {
    VerifyOptions {
        source: Source::Index,
        ..VerifyOptions::default()
    }
}

/// A repository with `gen/ctk_12_9/driver.rs` sealed and committed.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    write(
        &dir.path().join("gen/ctk_12_9/driver.rs"),
        &sealed("pub fn d() {}"),
    );
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "sealed"]);
    dir
}

#[test]
fn the_index_is_checked_and_the_work_tree_is_not() {
    let dir = repo();
    let driver = dir.path().join("gen/ctk_12_9/driver.rs");
    let root = [VerifyRoot::new(dir.path().join("gen"))];

    // Edited in the work tree only: the work tree fails, the index passes.
    let text = fs::read_to_string(&driver).unwrap();
    fs::write(&driver, text.replace("fn d", "fn e")).unwrap();
    let tree = hostcb_seal::verify_roots(&root, &VerifyOptions::default()).unwrap();
    assert_eq!(tree.failures.len(), 1, "{tree}");
    let index = hostcb_seal::verify_roots(&root, &staged()).unwrap();
    assert!(index.is_ok(), "{index}");
    assert_eq!(index.checked, std::slice::from_ref(&driver));
    assert!(
        index.to_string().contains("checked in the index"),
        "{index}"
    );

    // Staged: the index fails, and says the staged version does.
    git(dir.path(), &["add", "."]);
    let index = hostcb_seal::verify_roots(&root, &staged()).unwrap();
    assert_eq!(index.failures.len(), 1, "{index}");
    assert!(matches!(
        index.failures[0].problem,
        Problem::Seal(SealProblem::Mismatch { .. })
    ));
    let line = index.failures[0].to_string();
    assert!(
        line.starts_with(&format!(
            "{} (staged): edited after sealing",
            driver.display()
        )),
        "{line}"
    );
}

#[cfg(unix)]
#[test]
fn a_staged_link_fails_and_skipped_folders_stay_skipped() {
    let dir = repo();
    let link = dir.path().join("gen/ctk_12_9/runtime.rs");
    std::os::unix::fs::symlink("driver.rs", &link).unwrap();
    let edited = sealed("pub fn t() {}").replace("fn t", "fn u");
    write(&dir.path().join("gen/target/t.rs"), &edited);
    write(&dir.path().join("gen/.hidden/t.rs"), &edited);
    git(dir.path(), &["add", "-f", "."]);

    let report = hostcb_seal::verify_roots(&[VerifyRoot::new(dir.path())], &staged()).unwrap();
    assert_eq!(report.failures.len(), 1, "{report}");
    assert_eq!(report.failures[0].path, link);
    assert_eq!(
        report.failures[0].problem,
        Problem::NotRegular {
            kind: "a symbolic link"
        }
    );
}

#[test]
fn an_expected_file_missing_from_the_index_fails() {
    let dir = repo();
    let root = VerifyRoot::new(dir.path().join("gen"))
        .expecting(["ctk_12_9/driver.rs", "ctk_12_9/runtime.rs"]);
    // In the work tree, but not staged.
    write(
        &dir.path().join("gen/ctk_12_9/runtime.rs"),
        &sealed("pub fn r() {}"),
    );
    let report = hostcb_seal::verify_roots(&[root], &staged()).unwrap();
    assert_eq!(report.failures.len(), 1, "{report}");
    assert_eq!(report.failures[0].problem, Problem::Missing);
    assert!(report.failures[0].path.ends_with("ctk_12_9/runtime.rs"));
}

#[test]
fn outside_a_repository_the_index_cannot_be_verified() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("a.rs"), &sealed("pub fn a() {}"));
    let error = hostcb_seal::verify_roots(&[VerifyRoot::new(dir.path())], &staged()).unwrap_err();
    assert!(matches!(error, VerifyError::Index { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("not in a git work tree"), "{message}");
    assert!(message.contains("without --staged"), "{message}");
}
