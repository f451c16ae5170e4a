//! Records the SHA-256 of the sources this binary is built from (see `src/sources.rs`).

#[path = "src/sources.rs"]
mod sources;

fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = std::path::Path::new(&manifest)
        .parent()
        .expect("xtask/ is inside the workspace");
    for dir in sources::SOURCE_DIRS {
        println!("cargo::rerun-if-changed={}", root.join(dir).display());
    }
    let hash = sources::sources_sha256(root).expect("the xtask's sources are readable");
    println!("cargo::rustc-env=XTASK_SOURCES_SHA256={hash}");
}
