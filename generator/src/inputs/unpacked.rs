//! The unpacked part of a wheel, checked on every use. Unpacking writes a manifest of every file
//! it wrote (path, size, SHA-256) inside the new folder before that folder is renamed into place;
//! each later use checks the manifest against the wheel and the tree against the manifest before
//! anything reads the tree.
//!
//! What [`check`] guarantees when it passes: the tree holds exactly the files the wheel has under
//! the kept part (none added, none missing, no links, FIFOs or other special files), and each has
//! the size and SHA-256 that the wheel itself states for that entry: the line of its
//! `*.dist-info/RECORD`, or for an entry RECORD lacks, the hash of the entry's own bytes. The
//! wheel's SHA-256 is checked against `generator/inputs.lock` just before, and RECORD lies inside
//! the wheel, so the expectation comes from the lock, never from the cache: editing a header and
//! the manifest alike is caught, since the manifest must equal what the wheel states. What it
//! cannot guarantee: a file rewritten after the check, while bindgen runs (the check narrows that
//! window to one run, it does not close it); and anything outside the unpacked trees, such as gcc's
//! include folder that clang also reads.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use super::InputError;
use super::files::{hex, kind, open_regular, sha256_reader};

/// The manifest's name, at the root of an unpacked tree. No wheel entry lies there: every kept
/// part is a folder or file below a package folder.
pub(crate) const MANIFEST: &str = ".hostcb-manifest";

/// The first line of a manifest; the format's version is part of the unpack key too.
const HEADER: &str = "# hostcb unpacked files, format 1: <sha256> <size> <path>";

/// One unpacked file: its path relative to the tree's root (with `/`), size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileRecord {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// The manifest's text for `records` (sorted by path).
pub(crate) fn render(records: &[FileRecord]) -> String {
    let mut out = format!("{HEADER}\n");
    for r in records {
        out.push_str(&format!("{} {} {}\n", r.sha256, r.size, r.path));
    }
    out
}

fn parse(text: &str) -> Option<Vec<FileRecord>> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    lines
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let sha256 = parts.next()?;
            let size = parts.next()?.parse().ok()?;
            let path = parts.next()?;
            (sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
                FileRecord {
                    path: path.to_owned(),
                    size,
                    sha256: sha256.to_owned(),
                }
            })
        })
        .collect()
}

/// Decodes the unpadded URL-safe base64 of a RECORD hash.
fn base64_url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    Some(out)
}

/// The `sha256=` lines of a wheel's RECORD: path → (SHA-256 hex, size).
fn record_hashes(record: &str) -> BTreeMap<String, (String, Option<u64>)> {
    let mut out = BTreeMap::new();
    for line in record.lines() {
        // `path,sha256=<b64>,size`; the path may be quoted, the other two hold no comma.
        let mut parts = line.rsplitn(3, ',');
        let (Some(size), Some(hash), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = match path.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            Some(quoted) => quoted.replace("\"\"", "\""),
            None => path.to_owned(),
        };
        if let Some(digest) = hash.strip_prefix("sha256=").and_then(base64_url)
            && digest.len() == 32
        {
            out.insert(path, (hex(&digest), size.parse().ok()));
        }
    }
    out
}

/// Whether the entry `name` lies at or under `keep` (a folder or a single file of the wheel).
pub(crate) fn is_kept(name: &str, keep: &str) -> bool {
    name.strip_prefix(keep)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What the wheel states about its files under `keep`, sorted by path: each with its size and the
/// SHA-256 of its RECORD line, or of its bytes when RECORD has no line for it.
pub(crate) fn from_wheel(wheel: &Path, keep: &str) -> Result<Vec<FileRecord>, InputError> {
    let zip_err = |source| InputError::Zip {
        wheel: wheel.to_owned(),
        source,
    };
    let file = fs::File::open(wheel).map_err(InputError::io(wheel))?;
    let mut archive = zip::ZipArchive::new(io::BufReader::new(file)).map_err(zip_err)?;
    let mut record = String::new();
    let mut kept = Vec::new();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(zip_err)?;
        let name = entry.name().map_err(zip_err)?.into_owned();
        if !entry.is_dir() && is_kept(&name, keep) {
            kept.push((i, name));
        } else if name.ends_with(".dist-info/RECORD") && !name[..name.len() - 7].contains('/') {
            drop(entry);
            archive
                .by_index(i)
                .map_err(zip_err)?
                .read_to_string(&mut record)
                .map_err(InputError::io(wheel))?;
        }
    }
    let hashes = record_hashes(&record);
    let mut out = Vec::new();
    for (i, name) in kept {
        let size = archive.by_index_raw(i).map_err(zip_err)?.size();
        let sha256 = match hashes.get(&name) {
            Some((sha256, _)) => sha256.clone(),
            None => {
                sha256_reader(archive.by_index(i).map_err(zip_err)?)
                    .map_err(InputError::io(wheel))?
                    .0
            }
        };
        out.push(FileRecord {
            path: name,
            size,
            sha256,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Every file under `dir` (relative paths with `/`, sorted), or the first entry that is neither a
/// folder nor a regular file.
fn walk(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<Result<(), String>, InputError> {
    let dir = root.join(rel);
    let mut entries = fs::read_dir(&dir)
        .and_then(|e| e.collect::<io::Result<Vec<_>>>())
        .map_err(InputError::io(&dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let file_type = entry.file_type().map_err(InputError::io(entry.path()))?;
        if file_type.is_dir() {
            if let Err(problem) = walk(root, &path, out)? {
                return Ok(Err(problem));
            }
        } else if file_type.is_file() {
            out.push(path);
        } else {
            return Ok(Err(format!(
                "{path} is {}, which no wheel entry unpacks to",
                kind(file_type)
            )));
        }
    }
    Ok(Ok(()))
}

/// Checks the tree at `root`, unpacked from `keep` of the hash-checked `wheel`, as the module
/// documentation says. `Ok(Ok(records))` when it is intact; `Ok(Err(problem))` names the first
/// file that is not (added, missing, changed, or a missing or unreadable manifest); `Err` when the
/// wheel or the tree cannot be read at all.
pub(crate) fn check(
    wheel: &Path,
    keep: &str,
    root: &Path,
) -> Result<Result<Vec<FileRecord>, String>, InputError> {
    let manifest_path = root.join(MANIFEST);
    let manifest = match fs::symlink_metadata(&manifest_path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Err(format!("{MANIFEST} is missing")));
        }
        Err(e) => return Ok(Err(format!("{MANIFEST} cannot be examined ({e})"))),
        Ok(meta) if !meta.is_file() => {
            return Ok(Err(format!("{MANIFEST} is {}", kind(meta.file_type()))));
        }
        Ok(_) => match fs::read(&manifest_path).map(String::from_utf8) {
            Ok(Ok(text)) => parse(&text),
            _ => None,
        },
    };
    let Some(manifest) = manifest else {
        return Ok(Err(format!("{MANIFEST} is unreadable")));
    };
    let expected = from_wheel(wheel, keep)?;
    if manifest != expected {
        let differs = expected
            .iter()
            .zip(&manifest)
            .find(|(e, m)| e != m)
            .map(|(e, _)| e.path.clone())
            .or_else(|| expected.get(manifest.len()).map(|e| e.path.clone()))
            .or_else(|| manifest.get(expected.len()).map(|m| m.path.clone()))
            .unwrap_or_default();
        return Ok(Err(format!(
            "{MANIFEST} disagrees with the wheel on {differs}"
        )));
    }

    let mut files = Vec::new();
    if let Err(problem) = walk(root, "", &mut files)? {
        return Ok(Err(problem));
    }
    let listed: BTreeMap<&str, &FileRecord> =
        expected.iter().map(|r| (r.path.as_str(), r)).collect();
    if let Some(extra) = files
        .iter()
        .find(|f| f.as_str() != MANIFEST && !listed.contains_key(f.as_str()))
    {
        return Ok(Err(format!("{extra} is not in the wheel")));
    }
    if let Some(missing) = expected.iter().find(|r| !files.contains(&r.path)) {
        return Ok(Err(format!("{} is missing", missing.path)));
    }
    for r in &expected {
        let path = root.join(&r.path);
        let file = open_regular(&path, "delete the unpacked folder and retry")?;
        let size = file.metadata().map_err(InputError::io(&path))?.len();
        if size != r.size {
            return Ok(Err(format!(
                "{} has {size} bytes where the wheel's entry has {}",
                r.path, r.size
            )));
        }
        let (sha256, _) = sha256_reader(file).map_err(InputError::io(&path))?;
        if sha256 != r.sha256 {
            return Ok(Err(format!(
                "{} differs from the wheel's entry (sha256 {sha256}, the wheel's {})",
                r.path, r.sha256
            )));
        }
    }
    Ok(Ok(expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_and_their_base64() {
        // RECORD of a real wheel: sha256 of "a\n" is 87428fc5...
        let record = "pkg/a.h,sha256=h0KPxSKAPTEGXnvOPPA_5HUJZjHl4Hu9eg_eYMTPJcc,2\n\"pkg/b,c.h\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\npkg.dist-info/RECORD,,\n";
        let hashes = record_hashes(record);
        assert_eq!(
            hashes["pkg/a.h"],
            (super::super::files::sha256_hex(b"a\n"), Some(2))
        );
        assert_eq!(hashes["pkg/b,c.h"].0, super::super::files::sha256_hex(b""));
        assert_eq!(hashes.len(), 2);
    }

    #[test]
    fn manifest_round_trip() {
        let records = vec![FileRecord {
            path: "a b/c.h".into(),
            size: 3,
            sha256: "ab".repeat(32),
        }];
        assert_eq!(parse(&render(&records)), Some(records));
        assert_eq!(parse("junk\n"), None);
        assert_eq!(parse(&format!("{HEADER}\nxx 3 a\n")), None);
    }
}
