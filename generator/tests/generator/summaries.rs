//! The summary cache that lets `regen --ctk X` leave the other listed targets' wheels alone, on
//! the real pinned inputs (network on first use, as the other pipeline tests; the scratch cache
//! gets its wheels from the tests' one), and the parallel generation giving the bytes of the
//! serial one.

use std::collections::BTreeSet;
use std::path::Path;

use hostcb_generator::emit;
use hostcb_generator::pipeline::{self, CrateOutput, Options, Others};

use crate::config;

/// The configuration with two committed targets listed, 13.0 and 13.5: what these tests check
/// does not depend on which targets are listed, and the committed list's 12.9 reads the runtime
/// headers of every 12.x release before it, twice per test.
fn two_targets() -> hostcb_generator::config::Config {
    use hostcb_generator::Ctk;
    let mut config = config();
    for ctk in [Ctk::V13_0, Ctk::V13_5] {
        assert!(config.targets.contains(&ctk), "{ctk} is not listed");
    }
    config.targets = vec![Ctk::V13_0, Ctk::V13_5];
    config
}

fn wheels(cache: &Path) -> BTreeSet<String> {
    std::fs::read_dir(cache.join("wheels"))
        .map(|dir| {
            dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".whl"))
                .collect()
        })
        .unwrap_or_default()
}

fn bindings_mod(output: &CrateOutput) -> &[u8] {
    output
        .files
        .iter()
        .find(|f| f.path == Path::new(emit::BINDINGS_MOD))
        .expect("bindings/mod.rs in the output")
        .contents
        .as_bytes()
}

#[test]
fn a_partial_regen_takes_the_other_targets_from_their_cached_summaries() {
    let config = two_targets();
    assert!(
        config.targets.len() >= 2,
        "this test needs two listed targets: generator/targets.txt lists {:?}",
        config.targets
    );
    // A full generation (on the shared cache) caches every target's summary.
    let full = pipeline::generate_crate(
        &config,
        &config.targets,
        &Options::default(),
        Others::Read,
        |_| {},
    )
    .expect("generate every target");
    let first = config.targets[0];

    // A fresh cache holding the wheels of `first` and libclang, and the summaries: nothing of
    // the other targets' inputs.
    let scratch = tempfile::tempdir().unwrap();
    let lock = config.lock();
    // The wheels that reading a target's headers takes, by file name.
    let wheels_of = |ctk: hostcb_generator::Ctk| -> Vec<String> {
        let specs = lock.specs_read_by(ctk).unwrap();
        specs
            .iter()
            .map(|spec| lock.get(spec).unwrap().file.clone())
            .collect()
    };
    let copy = |files: &[String]| {
        std::fs::create_dir_all(scratch.path().join("wheels")).unwrap();
        for file in files {
            std::fs::copy(
                config.cache().join("wheels").join(file),
                scratch.path().join("wheels").join(file),
            )
            .unwrap();
        }
    };
    let mut files = wheels_of(first);
    files.extend(
        lock.entries()
            .iter()
            .filter(|e| e.name == "libclang")
            .map(|e| e.file.clone()),
    );
    copy(&files);
    // This generator's summaries of the listed targets (the shared cache may hold others').
    let summaries = scratch.path().join("summaries");
    std::fs::create_dir_all(&summaries).unwrap();
    let cache = pipeline::summaries::Cache::new(&config)
        .expect("a summary cache (it is off under a LIBCLANG_PATH override)");
    for &ctk in &config.targets {
        let path = cache.path(ctk).expect("a pinned target");
        std::fs::copy(&path, summaries.join(path.file_name().unwrap()))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let mut partial_config = config.clone();
    partial_config.inputs.cache = scratch.path().to_path_buf();
    let before = wheels(scratch.path());

    // What `regen --ctk <first>` computes.
    let regen_first = |what: &str| {
        pipeline::generate_crate(
            &partial_config,
            &[first],
            &Options::default(),
            Others::Cached,
            |_| {},
        )
        .unwrap_or_else(|e| panic!("regen one target, {what}: {e}"))
    };
    let partial = regen_first("the others' summaries cached");
    assert_eq!(
        wheels(scratch.path()),
        before,
        "regen --ctk {first} fetched other targets' wheels although their summaries were cached"
    );
    assert!(
        bindings_mod(&partial) == bindings_mod(&full),
        "the all-target module made from summaries differs from the one made from the models"
    );

    // A damaged summary is not used: the target's headers are read again (unpacked from its
    // wheels, put in the scratch cache now so that nothing is downloaded), and the summary made
    // from them is cached in its place, whole: only a reading of the headers writes it.
    let second = config.targets[1];
    copy(&wheels_of(second));
    let before = wheels(scratch.path());
    let damaged = pipeline::summaries::Cache::new(&partial_config)
        .and_then(|cache| cache.path(second))
        .expect("a summary path");
    let text = std::fs::read_to_string(&damaged).unwrap();
    // One cell changed, the file otherwise whole: only its SHA-256 line can tell.
    let tampered = text.replacen("10000", "10001", 1);
    assert_ne!(tampered, text);
    std::fs::write(&damaged, &tampered).unwrap();
    let again = regen_first("one summary damaged");
    assert_eq!(
        wheels(scratch.path()),
        before,
        "reading the headers of {second} fetched a wheel that the scratch cache was not given"
    );
    assert_eq!(
        std::fs::read_to_string(&damaged).unwrap(),
        text,
        "a damaged summary of {second} was used instead of its headers"
    );
    assert!(bindings_mod(&again) == bindings_mod(&full));
}

#[test]
fn parallel_generation_gives_the_serial_bytes() {
    let config = two_targets();
    let run = |threads| {
        pipeline::generate_crate_with(
            &config,
            &config.targets,
            &Options::default(),
            Others::Read,
            threads,
            |_| {},
        )
        .expect("generate")
    };
    let (serial, parallel) = (run(1), run(config.targets.len()));
    assert_eq!(serial.files.len(), parallel.files.len());
    for (a, b) in serial.files.iter().zip(&parallel.files) {
        assert_eq!(a.path, b.path);
        assert!(a.contents == b.contents, "{} differs", a.path.display());
    }
}
