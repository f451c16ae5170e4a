//! The generator's integration tests, in one executable (`cargo test -p hostcb-generator --test
//! generator [FILTER]`): each module is one subject and says what it covers; `fuzz::` names the
//! fuzzing harness's tests, `inputs::` those of the input fetching, and so on.
//!
//! The tests share one process and run on parallel threads, so what belongs to the process is
//! settled here:
//!
//! - the environment is read once, by [`environment`], before any test can load libclang: the
//!   first load sets `LIBCLANG_PATH` for a moment (`Libclang::activate`), and a test that read
//!   the environment then would take the pinned library for the user's override;
//! - a process loads one libclang: the first test that reads headers loads the pinned one and
//!   every other reuses it. `libclang_once` checks that rule from a fresh process, a child of
//!   this executable that runs that test alone.

use std::path::Path;
use std::sync::OnceLock;

use hostcb_generator::config::{Config, Environment};

mod abi_versions;
mod diff;
mod fuzz;
mod generated;
mod inputs;
mod libclang_once;
mod runtime_minimums;
mod summaries;
mod templates;

/// The workspace root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// This process's environment, read once: its libclang choice, and its input cache, or where
/// `HOSTCB_INPUTS_CACHE` is unset the tests' own (never the checkout's `target/hostcb-inputs`,
/// which another step may or may not have filled); the tests fetch what they read into it,
/// hash-checked.
fn environment() -> &'static Environment {
    static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| {
        let mut environment = Environment::of_process();
        environment
            .inputs_cache
            .get_or_insert_with(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostcb-inputs"));
        environment
    })
}

/// This checkout's configuration, with [`environment`].
fn config() -> Config {
    Config::load(root(), environment()).expect("the configuration")
}

/// The entries of the zip `bytes` whose names `read` accepts, in order: names and contents
/// (stored or deflated, each checked against its CRC-32 and size); `None` where rawzip and flate2
/// cannot read them, or a name is not UTF-8.
fn unzip(bytes: &[u8], read: impl Fn(&str) -> bool) -> Option<Vec<(String, Vec<u8>)>> {
    use std::io::Read;
    let archive = rawzip::ZipArchive::from_slice(bytes).ok()?;
    let mut out = Vec::new();
    for entry in archive.entries() {
        let entry = entry.ok()?;
        let name = String::from_utf8(entry.file_path().as_ref().to_vec()).ok()?;
        if !read(&name) {
            continue;
        }
        let local = archive.get_entry(entry.wayfinder()).ok()?;
        let mut content = Vec::new();
        match entry.compression_method() {
            rawzip::CompressionMethod::STORE => local
                .verifying_reader(local.data())
                .read_to_end(&mut content),
            rawzip::CompressionMethod::DEFLATE => local
                .verifying_reader(flate2::read::DeflateDecoder::new(local.data()))
                .read_to_end(&mut content),
            _ => return None,
        }
        .ok()?;
        out.push((name, content));
    }
    Some(out)
}

/// A zip of `entries`, each file stored by `method` (stored or deflated). The names are written
/// as they are, so that a hostile one stays hostile (and one given twice is written twice); a
/// name ending in `/` is a folder.
fn zip(entries: &[(String, Vec<u8>)], method: rawzip::CompressionMethod) -> Vec<u8> {
    use std::io::Write;
    let mut zip = rawzip::ZipArchiveWriter::new(Vec::new());
    for (name, content) in entries {
        let path = rawzip::path::EntryPath::verbatim(name.as_bytes());
        if name.ends_with('/') {
            zip.new_dir(path).unix_permissions(0o755).create().unwrap();
            continue;
        }
        let (mut entry, config) = zip
            .new_file(path)
            .compression_method(method)
            .unix_permissions(0o644)
            .start()
            .unwrap();
        let descriptor = if method == rawzip::CompressionMethod::DEFLATE {
            let deflate = flate2::write::DeflateEncoder::new(&mut entry, Default::default());
            let mut writer = config.wrap(deflate);
            writer.write_all(content).unwrap();
            let (deflate, descriptor) = writer.finish().unwrap();
            deflate.finish().unwrap();
            descriptor
        } else {
            let mut writer = config.wrap(&mut entry);
            writer.write_all(content).unwrap();
            writer.finish().unwrap().1
        };
        entry.finish(descriptor).unwrap();
    }
    zip.finish().unwrap()
}
