//! The xtask's integration tests, one test executable: each module below tests one side of
//! `cargo xtask`, running the real binary on the real pinned inputs (or a copy of this checkout,
//! or clones of it), and every module uses one kit, [`fixture`]. `cargo test -p xtask --test
//! xtask MODULE::` runs one module's tests.
//!
//! `autotests = false` in `xtask/Cargo.toml` keeps cargo from building each file here as an
//! executable of its own (each links the generator and bindgen); a file that is not a module
//! below would not run at all, which [`every_test_file_is_a_module`] refuses.

mod fixture;

mod backport;
mod bad_input;
mod builds;
mod cache_race;
mod diff;
mod docs;
mod output_tree;
mod regen;
mod shared_target;
mod targets;
mod trust;
mod verify;
mod workspace;
// The zips of the wheel tests, one file with the generator's tests.
#[path = "../../generator/tests/generator/wheels.rs"]
mod wheels;

/// Every `.rs` file and every folder of `xtask/tests/` is a module of this executable, declared
/// above: cargo builds nothing else here.
#[test]
fn every_test_file_is_a_module() {
    let here = fixture::workspace().join("xtask/tests");
    let main = std::fs::read_to_string(here.join("main.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&here).unwrap() {
        let path = entry.unwrap().path();
        let name = match path.file_stem().and_then(|n| n.to_str()) {
            Some("main") | None => continue,
            Some(name) => name,
        };
        if (path.is_dir() || path.extension().is_some_and(|x| x == "rs"))
            && !main.lines().any(|l| l == format!("mod {name};"))
        {
            missing.push(path.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "not a module of xtask/tests/main.rs, so never built nor run: {missing:?}"
    );
}
