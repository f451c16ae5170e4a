//! Zips for the tests that read and forge wheels: the generator's tests (`inputs`, `fuzz`) and
//! the xtask's (`bad_input`, which includes this file by path), one copy for both.

/// The RECORD hash of `bytes`, less its `sha256=`: the unpadded URL-safe base64 of the digest.
pub fn record_hash(bytes: &[u8]) -> String {
    use sha2::Digest;
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let digest = sha2::Sha256::digest(bytes);
    let mut out = String::new();
    for chunk in digest.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The entries of the zip `bytes` whose names `read` accepts, in order: names and contents
/// (stored or deflated, each checked against its CRC-32 and size); `None` where rawzip and flate2
/// cannot read them, or a name is not UTF-8.
pub fn unzip(bytes: &[u8], read: impl Fn(&str) -> bool) -> Option<Vec<(String, Vec<u8>)>> {
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
pub fn zip(entries: &[(String, Vec<u8>)], method: rawzip::CompressionMethod) -> Vec<u8> {
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
