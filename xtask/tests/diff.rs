//! `cargo xtask diff A B`: exit 0 whether or not the targets differ; with `--exit-code`, as
//! `git diff --exit-code`, 1 when they differ and 0 when they do not. Real headers, real libclang.

use std::process::Output;

use crate::fixture::{HUNG, output_within, workspace, xtask};

fn diff(args: &[&str]) -> Output {
    output_within(xtask(&workspace(), &["diff"]).args(args), HUNG)
}

#[test]
fn exit_code_says_whether_the_targets_differ() {
    for (args, code, differences) in [
        (&["12.9", "13.0"][..], 0, true),
        (&["12.9", "13.0", "--exit-code"][..], 1, true),
        (&["--exit-code", "13.0", "13.0"][..], 0, false),
        (&["13.0", "13.0"][..], 0, false),
    ] {
        let out = diff(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "diff {args:?}:\n{stderr}");
        // A difference is no error: the summary line counts them, and nothing else is said.
        assert!(!stderr.contains("error:"), "diff {args:?}:\n{stderr}");
        let summary = stderr.lines().last().unwrap_or_default();
        assert!(summary.starts_with("diff: "), "diff {args:?}:\n{stderr}");
        assert_eq!(
            !summary.starts_with("diff: 0 difference(s)"),
            differences,
            "diff {args:?}:\n{stderr}"
        );
        let first = stdout.lines().next().unwrap_or_default();
        assert_eq!(
            !first.contains(": 0 difference(s) in the models"),
            differences,
            "diff {args:?}:\n{first}"
        );
    }
}

#[test]
fn help_documents_the_exit_codes() {
    let out = diff(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("--exit-code")
            && help.contains("Exit 1 when the targets differ and 0 when they do not"),
        "{help}"
    );
}
