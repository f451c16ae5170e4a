//! One process loads one libclang: activating the pinned one twice (or the same bytes under
//! another path) reuses it; a libclang of other bytes is refused, before anything writes the
//! environment. (A test executable of its own: the rule is per process.)

use std::path::Path;

use hostcb_generator::config::{Config, Environment};
use hostcb_generator::inputs::{self, Libclang};

fn config() -> Config {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Config::load(root, &Environment::of_process()).expect("the configuration")
}

#[test]
fn a_process_loads_one_libclang() {
    let before = std::env::var_os("LIBCLANG_PATH");
    let pinned = inputs::libclang(&config().inputs).expect("the pinned libclang");
    pinned.activate().expect("the pinned libclang loads");
    pinned.activate().expect("activating it again reuses it");
    let elsewhere = Libclang {
        library: "/nowhere/libclang.so".into(),
        ..pinned.clone()
    };
    elsewhere
        .activate()
        .expect("the same bytes under another path reuse the loaded library");

    let mut other = pinned.clone();
    other.library = "/nowhere/other/libclang.so".into();
    other.source.sha256 = "0".repeat(64);
    let err = other.activate().expect_err("another libclang is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("has loaded another libclang already") && msg.contains(&pinned.source.sha256),
        "{msg}"
    );
    assert_eq!(
        std::env::var_os("LIBCLANG_PATH"),
        before,
        "the environment is as it was"
    );
}
