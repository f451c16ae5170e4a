//! `cargo xtask regen --out DIR`: a whole tree written elsewhere (a backport checkout), sealed,
//! and a second run that writes nothing.

use std::path::Path;
use std::process::Command;

fn regen(out: &Path) -> String {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["regen", "--ctk", "12.9", "--out"])
        .arg(out)
        .current_dir(workspace)
        .output()
        .expect("run xtask");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stderr}");
    stderr
}

#[test]
fn regen_into_another_tree_twice() {
    let out = tempfile::tempdir().unwrap();
    let first = regen(out.path());
    assert!(
        first.contains("regen: 3 files, 3 written, 0 unchanged"),
        "{first}"
    );
    let dir = out.path().join("src/bindings/ctk_12_9");
    for name in ["driver.rs", "runtime.rs", "provenance.toml"] {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    let report = hostcb_seal::verify_paths(&[out.path().to_path_buf()]).unwrap();
    assert!(report.is_ok() && report.checked.len() == 3, "{report}");
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".regen-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let second = regen(out.path());
    assert!(
        second.contains("regen: 3 files, 0 written, 3 unchanged"),
        "{second}"
    );
}
