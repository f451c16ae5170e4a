//! What a sealed file may be made from: only what the lock or the repository roots, each named by
//! its provenance (the templates too). The input cache is shared and writable, so a summary it
//! holds is used only when the committed, sealed provenance of its target vouches for it.

use hostcb_generator::config::Config;
use hostcb_generator::emit::{self, render::RecordedGenerator};
use hostcb_generator::writer::Templates;

use crate::fixture::{
    HUNG, changed, copy_generated_crate, copy_wheels, files_under, listing_copy, one_error,
    sha256_hex, succeeds, target_specs, workspace, xtask,
};

/// The attack of a writer of a shared input cache: after a regen has cached the summaries of the
/// targets it did not generate, one of them is rewritten so that `cuLaunchHostFunc` reads
/// `99999 / 99999`, with its trailing SHA-256 (a checksum, not a key) recomputed. The next
/// `regen --ctk X` leaves every byte of the generated crate as committed and names the file it
/// ignored; the run after that (the cache repaired from the headers) says nothing of it.
#[test]
fn a_forged_cached_summary_is_ignored_and_nothing_sealed_changes() {
    let targets = Config::listed_targets(&workspace()).unwrap();
    assert!(targets.len() >= 2, "{targets:?}");
    let (generated, forged) = (targets[0], targets[1]);
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let specs: Vec<String> = targets.iter().flat_map(|&ctk| target_specs(ctk)).collect();
    copy_wheels(&specs, &cache.join("wheels"));
    let out = scratch.path().join("generated");
    copy_generated_crate(&out);
    let committed = files_under(&out);
    let ctk_arg = generated.to_string();
    let regen = || {
        succeeds(
            xtask(&workspace(), &["regen", "--ctk", &ctk_arg, "--out"])
                .arg(&out)
                .env("HOSTCB_INPUTS_CACHE", &cache),
        )
    };

    // Reads the other targets' headers and caches their summaries; the committed tree is current.
    let first = regen();
    assert!(first.contains(", 0 written, "), "{first}");
    assert!(!first.contains("ignored"), "{first}");

    let summary = std::fs::read_dir(cache.join("summaries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{}-", forged.module()))
        })
        .expect("the regen cached the summary of a target it did not generate");
    let text = std::fs::read_to_string(&summary).unwrap();
    let (body, _) = text.rsplit_once("sha256 ").unwrap();
    let lie: String = body
        .lines()
        .map(
            |line| match line.strip_prefix("driver\tcuLaunchHostFunc\t") {
                Some(_) => "driver\tcuLaunchHostFunc\t99999 / 99999\n".to_owned(),
                None => format!("{line}\n"),
            },
        )
        .collect();
    assert_ne!(lie, body);
    let forgery = format!("{lie}sha256 {}\n", sha256_hex(lie.as_bytes()));
    std::fs::write(&summary, &forgery).unwrap();

    let second = regen();
    assert!(
        second.contains(&format!(
            "warning: ignored the cached summary of CTK {forged} at {}",
            summary.display()
        )),
        "{second}"
    );
    assert!(second.contains(", 0 written, "), "{second}");
    let changed = changed(&committed, &files_under(&out));
    assert!(
        changed.is_empty(),
        "{changed:?} changed: the forged summary reached them"
    );
    assert!(!std::fs::read_to_string(&summary).unwrap().contains("99999"));

    let third = regen();
    assert!(!third.contains("ignored"), "{third}");
}

/// The templates are part of the generator: an edit of one that changes no generated code (a
/// comment) still changes every generated file's provenance, so `check` fails, naming the
/// generator of the committed files and this one by their templates' SHA-256, until a regen
/// records the templates it read.
#[test]
fn a_template_edit_changes_provenance_and_check_notices() {
    // A copy that lists 13.0 alone: its checks read one target's headers, not three.
    let copy = listing_copy(&["13.0"]);
    let ctk = Config::listed_targets(copy.path()).unwrap()[0];
    let templates = || Templates::load(&copy.path().join("templates")).unwrap();
    let before = RecordedGenerator::this(templates().sha256());
    let layout = copy.path().join("templates/layout.rs");
    let text = std::fs::read_to_string(&layout).unwrap();
    std::fs::write(
        &layout,
        format!("{text}// A note that changes no generated code.\n"),
    )
    .unwrap();
    let after = RecordedGenerator::this(templates().sha256());
    assert_ne!(before, after);

    let check = || xtask(copy.path(), &["check", "--ctk", &ctk.to_string()]);
    let error = one_error(&mut check(), HUNG);
    assert!(
        error.contains(&format!(
            "made by another generator, {before}, not by this checkout's, {after};"
        )),
        "{error}"
    );
    succeeds(&mut xtask(
        copy.path(),
        &["regen", "--ctk", &ctk.to_string()],
    ));
    succeeds(&mut check());
    let provenance = copy
        .path()
        .join("generated")
        .join(emit::target_dir(ctk))
        .join(emit::PROVENANCE);
    let provenance = std::fs::read_to_string(provenance).unwrap();
    let recorded = format!("\ntemplates_sha256 = \"{}\"\n", templates().sha256());
    assert!(provenance.contains(&recorded), "{provenance}");
}
