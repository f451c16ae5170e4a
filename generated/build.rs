//! Finds whether any CUDA toolkit target feature (`ctk-<major>-<minor>`) is enabled. With none,
//! it sets the cfg `hostcb_no_target`, under which `src/lib.rs` stops the build with an error
//! naming the target features this crate has (read from its own `Cargo.toml`, so this file names
//! none). Cargo reruns it whenever the enabled features change.

use std::fmt::Write as _;

fn main() {
    println!("cargo::rerun-if-changed=Cargo.toml");
    println!("cargo::rustc-check-cfg=cfg(hostcb_no_target)");
    let enabled = std::env::vars_os().any(|(name, _)| {
        name.to_str()
            .is_some_and(|name| name.starts_with("CARGO_FEATURE_CTK_"))
    });
    if enabled {
        return;
    }
    let manifest = std::fs::read_to_string("Cargo.toml").unwrap_or_default();
    let mut features = String::new();
    for name in manifest
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| is_target_feature(name))
    {
        let separator = if features.is_empty() { "" } else { ", " };
        let _ = write!(features, "{separator}`{name}`");
    }
    println!("cargo::rustc-cfg=hostcb_no_target");
    println!("cargo::rustc-env=HOSTCB_TARGET_FEATURES={features}");
}

/// Whether `name` is spelled `ctk-<digits>-<digits>`.
fn is_target_feature(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix("ctk-")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(major, minor)| digits(major) && digits(minor))
}
