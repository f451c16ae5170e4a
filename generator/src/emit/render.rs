//! Rendering: puts the generated-file header on a written file's text
//! (the header names the generator that made it) and seals it; and each target's provenance
//! manifest.

use std::path::{Path, PathBuf};

use super::{EmitError, GeneratedFile, PROVENANCE, target_dir};
use crate::Ctk;
use crate::inputs::Provenance;

/// Spelled with an escape so that the generator's own source never looks generated.
const GENERATED: &str = "\x40generated";

/// The generator's package name.
pub const GENERATOR_NAME: &str = "hostcb-generator";

/// The generator's version (the same in every checkout of one release: it does not tell two
/// generators apart; [`crate::BUILT_FROM_SOURCES`] does).
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which generator made a generated file, as its header line records it: its version, the
/// SHA-256 of the sources it was compiled from ([`crate::BUILT_FROM_SOURCES`]) and that of the
/// templates it read ([`crate::writer::Templates::sha256`]), e.g. `hostcb-generator 0.1.0
/// (sources sha256 3f2a..., templates sha256 9c1e...)`. Every change under `generator/src/` or
/// `templates/` changes it, so such a change rewrites every generated file, and `cargo xtask
/// check` can tell files that another checkout's generator made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedGenerator {
    /// The generator's version.
    pub version: String,
    /// The SHA-256 of the generator's sources; `None` for a file made before generators
    /// recorded it.
    pub sources: Option<String>,
    /// The SHA-256 of the templates the generator read; `None` for a file made before
    /// generators recorded it.
    pub templates: Option<String>,
}

impl RecordedGenerator {
    /// The generator running now, with the templates whose SHA-256 is `templates_sha256`.
    pub fn this(templates_sha256: &str) -> Self {
        RecordedGenerator {
            version: GENERATOR_VERSION.to_owned(),
            sources: Some(crate::BUILT_FROM_SOURCES.to_owned()),
            templates: Some(templates_sha256.to_owned()),
        }
    }

    /// Reads the header line of a generated file (its first line): `None` when it is not the
    /// header this generator writes.
    pub fn of_file(contents: &[u8]) -> Option<Self> {
        let first = contents.split(|b| *b == b'\n').next()?;
        let first = std::str::from_utf8(first).ok()?;
        let by = format!("{GENERATED} by {GENERATOR_NAME} ");
        let rest = &first[first.find(&by)? + by.len()..];
        let (version, rest) = rest.split_once(' ')?;
        let hashes = rest
            .strip_prefix("(sources sha256 ")
            .and_then(|r| Some(r.split_once(')')?.0));
        let (sources, templates) = match hashes.map(|h| h.split_once(", templates sha256 ")) {
            Some(Some((sources, templates))) => (Some(sources), Some(templates)),
            Some(None) => (hashes, None),
            None => (None, None),
        };
        Some(RecordedGenerator {
            version: version.to_owned(),
            sources: sources.map(str::to_owned),
            templates: templates.map(str::to_owned),
        })
    }
}

impl std::fmt::Display for RecordedGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{GENERATOR_NAME} {} ", self.version)?;
        match (&self.sources, &self.templates) {
            (Some(sources), Some(templates)) => write!(
                f,
                "(sources sha256 {sources}, templates sha256 {templates})"
            ),
            (Some(sources), None) => write!(f, "(sources sha256 {sources})"),
            (None, _) => write!(f, "(of sources it did not record)"),
        }
    }
}

/// Seals the text of a Rust file ([`crate::writer::Written::text`]) as the file at `path`, made from the headers of `ctk`
/// (in its folder, [`target_dir`]) or, with `None`, from every listed target
/// ([`super::BINDINGS_MOD`], [`super::COMMON`]).
pub fn rust_file(
    generator: &RecordedGenerator,
    ctk: Option<Ctk>,
    path: PathBuf,
    text: String,
) -> Result<GeneratedFile, EmitError> {
    seal(generator, ctk, path, "//", text)
}

/// The provenance manifest of one target: what generated it (`[generator]`: its version and the
/// SHA-256 of its sources and of its templates), from which inputs, and the SHA-256 of its
/// summary's text (`[summary]`, [`crate::model::Summary::to_text`]): the one summary of the
/// target that a later `regen --ctk X` may take from the input cache
/// ([`sealed_summary_sha256`]).
pub fn provenance_file(
    generator: &RecordedGenerator,
    ctk: Ctk,
    inputs: &[Provenance],
    files: &[&GeneratedFile],
    summary_sha256: &str,
) -> Result<GeneratedFile, EmitError> {
    let mut body = format!(
        "# Provenance of the generated bindings of this target.\n\n[generator]\nname = \"{GENERATOR_NAME}\"\nversion = \"{}\"\n",
        generator.version
    );
    for (key, hash) in [
        ("sources", &generator.sources),
        ("templates", &generator.templates),
    ] {
        if let Some(hash) = hash {
            body.push_str(&format!("{key}_sha256 = \"{hash}\"\n"));
        }
    }
    body.push_str(&format!(
        "\n[target]\nctk = \"{ctk}\"\ncuda_version = {}\n",
        ctk.cuda_version()
    ));
    for p in inputs {
        body.push_str(&format!(
            "\n[[input]]\nname = \"{}\"\nversion = \"{}\"\nfile = \"{}\"\nsha256 = \"{}\"\n",
            p.name, p.version, p.file, p.sha256
        ));
    }
    for f in files {
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        body.push_str(&format!("\n[[file]]\npath = \"{name}\"\n"));
    }
    body.push_str(&format!("{SUMMARY_SECTION}{summary_sha256}\"\n"));
    seal(
        generator,
        Some(ctk),
        target_dir(ctk).join(PROVENANCE),
        "#",
        body,
    )
}

/// How the summary's digest is written in a provenance manifest, up to the digest.
const SUMMARY_SECTION: &str = "\n[summary]\nsha256 = \"";

/// The SHA-256 of the summary that the sealed provenance manifest of `ctk` in the generated crate
/// at `root` records, when that file is there, its seal checks and names `ctk`, and it records
/// one; `None` otherwise. What vouches for a cached summary: the repository's own sealed file,
/// never the cache that holds the summary.
pub fn sealed_summary_sha256(root: &Path, ctk: Ctk) -> Option<String> {
    let bytes = std::fs::read(root.join(target_dir(ctk)).join(PROVENANCE)).ok()?;
    let seal = hostcb_seal::check_contents(&bytes).ok()?;
    if seal.ctk != ctk.to_string() {
        return None;
    }
    summary_sha256_of(std::str::from_utf8(&bytes).ok()?)
}

/// The digest after the one [`SUMMARY_SECTION`] of a provenance manifest's text.
fn summary_sha256_of(text: &str) -> Option<String> {
    let mut sections = text.match_indices(SUMMARY_SECTION);
    let (at, _) = sections.next()?;
    if sections.next().is_some() {
        return None;
    }
    let rest = &text[at + SUMMARY_SECTION.len()..];
    let (digest, after) = rest.split_once('"')?;
    (digest.len() == 64
        && digest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && after.starts_with('\n'))
    .then(|| digest.to_owned())
}

/// `body` under the header that names `generator` and what the file was made from (the headers
/// of `ctk`, or with `None` every listed target), sealed for `ctk` (or `all`).
fn seal(
    generator: &RecordedGenerator,
    ctk: Option<Ctk>,
    path: PathBuf,
    prefix: &str,
    body: String,
) -> Result<GeneratedFile, EmitError> {
    let (from, of) = match ctk {
        Some(ctk) => (format!("the CTK {ctk} headers"), ctk.to_string()),
        None => ("generator/targets.txt".to_owned(), "all".to_owned()),
    };
    let unsealed = format!(
        "{prefix} {GENERATED} by {generator} from {from}. Do not edit: regenerate with `cargo xtask regen --ctk {of}`.\n{body}"
    );
    let contents = hostcb_seal::seal(&unsealed, &of, prefix).map_err(|source| EmitError::Seal {
        path: path.clone(),
        source,
    })?;
    Ok(GeneratedFile { path, contents })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_provenance_record_the_generator_its_sources_and_its_templates() {
        let templates = "9c".repeat(32);
        let this = RecordedGenerator::this(&templates);
        let file = parse_rust(&this, "pub fn d() {}");
        let first = file.contents.lines().next().unwrap();
        assert!(
            first.contains(&format!(
                "by hostcb-generator {GENERATOR_VERSION} (sources sha256 {}, templates sha256 {templates}) from the CTK 12.9 headers",
                crate::BUILT_FROM_SOURCES
            )),
            "{first}"
        );
        let recorded = RecordedGenerator::of_file(file.contents.as_bytes()).unwrap();
        assert_eq!(recorded, this);
        assert!(first.contains(&format!(" by {recorded} from ")), "{first}");
        // Files of generators that recorded no template hash, or no source hash either.
        let sources_only = format!(
            "// {GENERATED} by hostcb-generator 0.1.0 (sources sha256 {}) from the CTK 12.9 headers. Do not edit.\n",
            "ef".repeat(32)
        );
        let sources_only = RecordedGenerator::of_file(sources_only.as_bytes()).unwrap();
        assert_eq!(sources_only.sources, Some("ef".repeat(32)));
        assert_eq!(sources_only.templates, None);
        assert!(
            sources_only
                .to_string()
                .ends_with(&format!("(sources sha256 {})", "ef".repeat(32)))
        );
        let old = format!(
            "// {GENERATED} by hostcb-generator 0.1.0 from the CTK 12.9 headers. Do not edit.\n"
        );
        let old = RecordedGenerator::of_file(old.as_bytes()).unwrap();
        assert_eq!((old.sources, old.templates), (None, None));
        // Other templates make another generator.
        let other = parse_rust(&RecordedGenerator::this(&"0".repeat(64)), "pub fn d() {}");
        let other = RecordedGenerator::of_file(other.contents.as_bytes()).unwrap();
        assert_eq!(other.templates.as_deref(), Some("0".repeat(64).as_str()));
        assert_ne!(other, this);
        assert!(RecordedGenerator::of_file(b"pub fn d() {}\n").is_none());

        let provenance =
            provenance_file(&this, Ctk::V12_9, &[], &[&file], &"ab".repeat(32)).unwrap();
        assert!(
            provenance.contents.contains(&format!(
                "\n[generator]\nname = \"hostcb-generator\"\nversion = \"{GENERATOR_VERSION}\"\nsources_sha256 = \"{}\"\ntemplates_sha256 = \"{templates}\"\n\n[target]\n",
                crate::BUILT_FROM_SOURCES
            )),
            "{}",
            provenance.contents
        );
        // The summary's digest is read back from the sealed file, and only from a sealed file
        // of this target.
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join(&provenance.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &provenance.contents).unwrap();
        assert_eq!(
            sealed_summary_sha256(root.path(), Ctk::V12_9),
            Some("ab".repeat(32))
        );
        let edited = provenance
            .contents
            .replace(&"ab".repeat(32), &"cd".repeat(32));
        std::fs::write(&path, &edited).unwrap();
        assert_eq!(sealed_summary_sha256(root.path(), Ctk::V12_9), None);
        std::fs::write(&path, &provenance.contents).unwrap();
        let other = root.path().join(target_dir(Ctk::V13_0)).join(PROVENANCE);
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::copy(&path, other).unwrap();
        assert_eq!(sealed_summary_sha256(root.path(), Ctk::V13_0), None);
    }

    /// `code` as the sealed driver.rs of 12.9, made by `generator`.
    fn parse_rust(generator: &RecordedGenerator, code: &str) -> GeneratedFile {
        let file = syn::parse_file(code).unwrap();
        let path = target_dir(Ctk::V12_9).join("driver.rs");
        rust_file(
            generator,
            Some(Ctk::V12_9),
            path,
            prettyplease::unparse(&file),
        )
        .unwrap()
    }
}
