//! Rendering: formats a written syntax tree with prettyplease, puts the generated-file header
//! (which names the generator that made it) on top, and seals it; and each target's provenance
//! manifest.

use std::path::{Path, PathBuf};

use super::{BINDINGS_MOD, COMMON, EmitError, GeneratedFile, PROVENANCE, target_dir};
use crate::Ctk;
use crate::inputs::Provenance;

/// Spelled with an escape so that the generator's own source never looks generated.
const GENERATED: &str = "\x40generated";

/// The generator's package name.
pub const GENERATOR_NAME: &str = "hostcb-generator";

/// The generator's version (the same in every checkout of one release: it does not tell two
/// generators apart; [`crate::BUILT_FROM_SOURCES`] does).
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which generator makes the files, as their headers record it: its name, its version and the
/// SHA-256 of the sources it was compiled from ([`crate::BUILT_FROM_SOURCES`]), e.g.
/// `hostcb-generator 0.1.0 (sources sha256 3f2a...)`. Every change under `generator/src/`
/// changes it, so a generator change rewrites every generated file, and `cargo xtask check` can
/// tell files that another checkout's generator made.
pub const GENERATOR: &str = concat!(
    "hostcb-generator ",
    env!("CARGO_PKG_VERSION"),
    " (sources sha256 ",
    env!("HOSTCB_BUILT_FROM_SOURCES"),
    ")"
);

/// The sealed `src/bindings/mod.rs` of `targets`, from the writer's syntax tree.
pub fn bindings_mod(file: &syn::File) -> Result<GeneratedFile, EmitError> {
    all_targets(BINDINGS_MOD, file)
}

/// The sealed `src/bindings/common.rs` of `targets`, from the writer's syntax tree.
pub fn common(file: &syn::File) -> Result<GeneratedFile, EmitError> {
    all_targets(COMMON, file)
}

/// A sealed file made from every listed target.
fn all_targets(path: &str, file: &syn::File) -> Result<GeneratedFile, EmitError> {
    let header = format!(
        "// {GENERATED} by {GENERATOR} from generator/targets.txt. Do not edit: regenerate with `cargo xtask regen --ctk all`.\n"
    );
    let unsealed = format!("{header}{}", prettyplease::unparse(file));
    let path = PathBuf::from(path);
    let contents = hostcb_seal::seal(&unsealed, "all", "//").map_err(|source| EmitError::Seal {
        path: path.clone(),
        source,
    })?;
    Ok(GeneratedFile { path, contents })
}

/// Which generator made a generated file, as its header line records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedGenerator {
    /// The generator's version.
    pub version: String,
    /// The SHA-256 of the generator's sources; `None` for a file made before generators
    /// recorded it.
    pub sources: Option<String>,
}

impl RecordedGenerator {
    /// The generator running now.
    pub fn this() -> Self {
        RecordedGenerator {
            version: GENERATOR_VERSION.to_owned(),
            sources: Some(crate::BUILT_FROM_SOURCES.to_owned()),
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
        let sources = rest
            .strip_prefix("(sources sha256 ")
            .and_then(|r| r.split_once(')'))
            .map(|(hash, _)| hash.to_owned());
        Some(RecordedGenerator {
            version: version.to_owned(),
            sources,
        })
    }
}

impl std::fmt::Display for RecordedGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.sources {
            Some(hash) => write!(
                f,
                "{GENERATOR_NAME} {} (sources sha256 {hash})",
                self.version
            ),
            None => write!(
                f,
                "{GENERATOR_NAME} {} (of sources it did not record)",
                self.version
            ),
        }
    }
}

fn header(ctk: Ctk, prefix: &str) -> String {
    format!(
        "{prefix} {GENERATED} by {GENERATOR} from the CTK {ctk} headers. Do not edit: regenerate with `cargo xtask regen --ctk {ctk}`.\n"
    )
}

/// Formats a Rust syntax tree and seals it as the file `name` of the target.
pub fn rust_file(ctk: Ctk, name: &str, file: &syn::File) -> Result<GeneratedFile, EmitError> {
    let body = prettyplease::unparse(file);
    seal_file(ctk, target_dir(ctk).join(name), "//", body)
}

/// The provenance manifest of one target: what generated it, from which inputs, and the SHA-256
/// of its summary's text (`[summary]`, [`crate::model::Summary::to_text`]): the one summary of
/// the target that a later `regen --ctk X` may take from the input cache
/// ([`sealed_summary_sha256`]).
pub fn provenance_file(
    ctk: Ctk,
    inputs: &[Provenance],
    files: &[&GeneratedFile],
    summary_sha256: &str,
) -> Result<GeneratedFile, EmitError> {
    let mut body = String::new();
    body.push_str("# Provenance of the generated bindings of this target.\n\n");
    body.push_str(&format!(
        "[generator]\nname = \"{GENERATOR_NAME}\"\nversion = \"{GENERATOR_VERSION}\"\nsources_sha256 = \"{}\"\n\n",
        crate::BUILT_FROM_SOURCES
    ));
    body.push_str(&format!(
        "[target]\nctk = \"{ctk}\"\ncuda_version = {}\n",
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
    seal_file(ctk, target_dir(ctk).join(PROVENANCE), "#", body)
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

fn seal_file(
    ctk: Ctk,
    path: PathBuf,
    prefix: &str,
    body: String,
) -> Result<GeneratedFile, EmitError> {
    let unsealed = format!("{}{body}", header(ctk, prefix));
    let contents = hostcb_seal::seal(&unsealed, &ctk.to_string(), prefix).map_err(|source| {
        EmitError::Seal {
            path: path.clone(),
            source,
        }
    })?;
    Ok(GeneratedFile { path, contents })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_record_the_generator_and_its_sources() {
        let file = seal_file(
            Ctk::V12_9,
            target_dir(Ctk::V12_9).join("driver.rs"),
            "//",
            "pub fn d() {}\n".to_owned(),
        )
        .unwrap();
        let first = file.contents.lines().next().unwrap();
        assert!(
            first.contains(&format!(
                "by hostcb-generator {GENERATOR_VERSION} (sources sha256 {}) from the CTK 12.9 headers",
                crate::BUILT_FROM_SOURCES
            )),
            "{first}"
        );
        let recorded = RecordedGenerator::of_file(file.contents.as_bytes()).unwrap();
        assert_eq!(recorded, RecordedGenerator::this());
        assert_eq!(recorded.to_string(), GENERATOR);
        // A file of a generator that recorded no source hash, and of another generator.
        let old = format!(
            "// {GENERATED} by hostcb-generator 0.1.0 from the CTK 12.9 headers. Do not edit.\n"
        );
        let old = RecordedGenerator::of_file(old.as_bytes()).unwrap();
        assert_eq!(old.sources, None);
        assert_ne!(old, RecordedGenerator::this());
        let other = file
            .contents
            .replacen(crate::BUILT_FROM_SOURCES, &"0".repeat(64), 1);
        let other = RecordedGenerator::of_file(other.as_bytes()).unwrap();
        assert_eq!(other.sources.as_deref(), Some("0".repeat(64).as_str()));
        assert!(RecordedGenerator::of_file(b"pub fn d() {}\n").is_none());

        let provenance = provenance_file(Ctk::V12_9, &[], &[&file], &"ab".repeat(32)).unwrap();
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
        assert!(
            provenance.contents.contains(&format!(
                "\n[generator]\nname = \"hostcb-generator\"\nversion = \"{GENERATOR_VERSION}\"\nsources_sha256 = \"{}\"\n",
                crate::BUILT_FROM_SOURCES
            )),
            "{}",
            provenance.contents
        );
    }
}
