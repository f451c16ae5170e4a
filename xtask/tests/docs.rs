//! The documentation holds together: every relative link and anchor of the README, the guide
//! (`docs/`), `ARCHITECTURE.md`, `CHANGELOG.md`, `tests/README.md` and the crate pages resolves
//! to a file (and a heading); the crate pages, shown on crates.io where no relative link can be
//! followed, link nothing relative; and the figures the README states are those of their sources
//! (the targets table against `generator/targets.txt` and `generator/inputs.lock`, the minimum
//! Rust version against `Cargo.toml`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::fixture::workspace;

/// The crate pages: each published crate's README.md, its crates.io page.
const CRATE_PAGES: &[&str] = &[
    "generated/README.md",
    "safe/README.md",
    "generator/seal/README.md",
    "generator/seal/cli/README.md",
];

/// Every Markdown file whose links are checked, relative to the root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "CHANGELOG.md",
        "tests/README.md",
    ]
    .iter()
    .chain(CRATE_PAGES)
    .map(PathBuf::from)
    .collect();
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(root).unwrap().to_path_buf())
        .collect();
    guide.sort();
    docs.extend(guide);
    docs
}

/// The links of a Markdown text and the anchors of its headings (GitHub's: lower case, spaces
/// to `-`, punctuation other than `-` and `_` dropped, `-N` added to repeats).
fn links_and_anchors(text: &str) -> (Vec<String>, BTreeSet<String>) {
    let mut links = Vec::new();
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push(dest_url.into_string());
            }
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = heading.take().unwrap_or_default();
                let slug: String = text
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                let n = seen.entry(slug.clone()).or_default();
                anchors.insert(if *n == 0 {
                    slug.clone()
                } else {
                    format!("{slug}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    (links, anchors)
}

fn is_absolute(link: &str) -> bool {
    link.contains("://") || link.starts_with("mailto:")
}

/// Every problem with the relative links of the documents: `file: link: why`.
fn broken_links(root: &Path, docs: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    let mut anchors_of: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut anchors = |path: &Path| -> BTreeSet<String> {
        anchors_of
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                links_and_anchors(&std::fs::read_to_string(path).unwrap_or_default()).1
            })
            .clone()
    };
    for doc in docs {
        let path = root.join(doc);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let (links, _) = links_and_anchors(&text);
        for link in links {
            if is_absolute(&link) {
                continue;
            }
            let (file, anchor) = match link.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() {
                path.clone()
            } else {
                path.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!(
                    "{}: {link}: {} does not exist",
                    doc.display(),
                    file
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                if target.extension().is_none_or(|x| x != "md") {
                    broken.push(format!(
                        "{}: {link}: an anchor into a file that is not Markdown",
                        doc.display()
                    ));
                } else if !anchors(&target).contains(anchor) {
                    broken.push(format!(
                        "{}: {link}: {} has no heading #{anchor}",
                        doc.display(),
                        target.strip_prefix(root).unwrap_or(&target).display()
                    ));
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = workspace();
    let docs = documents(&root);
    assert!(docs.len() >= 12, "{docs:?}");
    let broken = broken_links(&root, &docs);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The checker finds what it is for: a missing file, a missing heading, a good link passes.
#[test]
fn the_link_check_sees_a_broken_link() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(
        dir.path().join("docs/a.md"),
        "# A page\n\n## Second, part `two`\n\n[ok](b.md#the-end) [self](#second-part-two)\n[gone](missing.md) [no heading](b.md#nowhere)\n\n```text\n[in code](ignored.md)\n```\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("docs/b.md"), "# The end\n").unwrap();
    let broken = broken_links(dir.path(), &[PathBuf::from("docs/a.md")]);
    assert_eq!(
        broken,
        [
            "docs/a.md: missing.md: missing.md does not exist",
            "docs/a.md: b.md#nowhere: docs/b.md has no heading #nowhere",
        ]
    );
}

#[test]
fn crate_pages_link_nothing_relative_and_are_their_crates_readmes() {
    let root = workspace();
    for page in CRATE_PAGES {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let relative: Vec<String> = links_and_anchors(&text)
            .0
            .into_iter()
            .filter(|l| !is_absolute(l))
            .collect();
        assert!(
            relative.is_empty(),
            "{page} is a crates.io page, where relative links cannot be followed: {relative:?}"
        );
        let manifest = Path::new(page).with_file_name("Cargo.toml");
        let manifest = std::fs::read_to_string(root.join(&manifest)).unwrap();
        assert!(
            manifest.lines().any(|l| l == "readme = \"README.md\""),
            "{page}: its crate's Cargo.toml must say readme = \"README.md\""
        );
        assert!(
            manifest.contains("\n[package.metadata.docs.rs]\n") || page.contains("/cli/"),
            "{page}: its crate's Cargo.toml has no [package.metadata.docs.rs]"
        );
    }
}

/// The rows of the README's targets table, by target: its cells.
fn readme_targets(readme: &str) -> BTreeMap<String, Vec<String>> {
    let section = readme
        .split("\n## Targets\n")
        .nth(1)
        .expect("the README has a section Targets");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| target |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect();
            (cells[0].clone(), cells)
        })
        .collect()
}

#[test]
fn the_readme_targets_table_is_that_of_the_target_list_and_the_lock() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let rows = readme_targets(&readme);
    let listed: Vec<String> = std::fs::read_to_string(root.join("generator/targets.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().to_owned())
        .collect();
    assert_eq!(
        rows.keys().cloned().collect::<Vec<_>>(),
        listed,
        "the README's targets table must have one row per target of generator/targets.txt"
    );
    let lock = std::fs::read_to_string(root.join("generator/inputs.lock")).unwrap();
    for (target, cells) in &rows {
        let (major, minor) = target.split_once('.').unwrap();
        let packages: Vec<String> = lock
            .lines()
            .find_map(|l| l.strip_prefix(&format!("target {target} ")))
            .unwrap_or_else(|| panic!("generator/inputs.lock pins no target {target}"))
            .split_whitespace()
            .map(|p| format!("`{p}`"))
            .collect();
        let expected = [
            target.clone(),
            format!("`ctk-{major}-{minor}`"),
            format!("`cuda_hostcb::ctk_{major}_{minor}`"),
            packages.join(", "),
            format!("`libcudart.so.{major}`"),
        ];
        assert_eq!(cells[..], expected[..], "the README's row of {target}");
    }
}

#[test]
fn the_readme_is_short_and_names_the_minimum_rust_of_the_manifest() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "the README has {lines} lines; keep it under 200"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rust = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml has a rust-version");
    assert!(
        readme.contains(&format!(
            "(the `rust-version` of `Cargo.toml`, {rust}, or newer)"
        )),
        "the README must name the rust-version of Cargo.toml, {rust}"
    );
}

/// Markdown text with every run of white space one space, so a claim matches across line breaks.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `[dependencies]` of a crate's manifest (plain and per-target), by name.
fn dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_deps = false;
    let mut names = BTreeSet::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]"
                || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
        } else if in_deps && let Some((name, _)) = line.split_once(['=', '.']) {
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// What the pages say a crate depends on is what its manifest says.
#[test]
fn the_dependencies_the_docs_name_are_the_manifests() {
    let root = workspace();
    let deps = |crate_dir: &str| {
        dependencies(&std::fs::read_to_string(root.join(crate_dir).join("Cargo.toml")).unwrap())
    };
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // generator/seal/README.md: "two dependencies (`sha2`, and `libc` on Unix)".
    assert_eq!(deps("generator/seal"), names(&["libc", "sha2"]));
    let page = std::fs::read_to_string(root.join("generator/seal/README.md")).unwrap();
    assert!(flat(&page).contains("two dependencies (`sha2`, and `libc` on Unix)"));
    // ARCHITECTURE.md: what may depend on what.
    let arch = flat(&std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap());
    assert!(arch.contains(
        "`cuda-hostcb` depends on `libloading` only; `cuda-hostcb-safe` on `cuda-hostcb` only."
    ));
    assert_eq!(deps("generated"), names(&["libloading"]));
    assert_eq!(deps("safe"), names(&["cuda-hostcb"]));
    assert!(arch.contains("`hostcb-seal-cli` on `hostcb-seal` only"));
    assert!(deps("generator/seal/cli").contains("hostcb-seal"));
    assert!(
        !deps("generator/seal/cli")
            .iter()
            .any(|d| d.starts_with("hostcb-") && d != "hostcb-seal")
    );
}

/// The guide's example of a driver function's own ABI version is the generated binding's.
#[test]
fn the_guides_abi_versions_are_the_generated_ones() {
    let root = workspace();
    let guide = std::fs::read_to_string(root.join("docs/generator.md")).unwrap();
    // The text the claim is made in, whatever its line breaks.
    assert!(flat(&guide).contains(
        "in 13.5 the 3-argument `cuLaunchHostFunc` is version 10000, while asking for 13050 could return the 4-argument ABI"
    ));
    let driver = std::fs::read_to_string(root.join("generated/src/bindings/ctk_13_5/driver.rs"))
        .expect("13.5 is a committed target; if it no longer is, change the guide's example");
    for resolved in [
        "`cuGetProcAddress(\"cuLaunchHostFunc\", 10000)`",
        "`cuGetProcAddress(\"cuLaunchHostFunc\", 13010)`",
    ] {
        assert!(
            driver.contains(resolved),
            "13.5's driver.rs lacks {resolved}"
        );
    }
    let lock = std::fs::read_to_string(root.join("generator/inputs.lock")).unwrap();
    assert!(
        lock.contains("nvidia-cuda-runtime==13.5."),
        "13050 is CTK 13.5's CUDA_VERSION"
    );
}

/// The CHANGELOG has a section for the workspace's version, as the API check asks.
#[test]
fn the_changelog_has_a_section_for_the_version() {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let version = manifest
        .split("\n[workspace.package]\n")
        .nth(1)
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("version = \"")))
        .and_then(|v| v.strip_suffix('"'))
        .expect("[workspace.package] has a version");
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap();
    assert!(
        changelog
            .lines()
            .any(|l| l.starts_with(&format!("## [{version}]"))),
        "CHANGELOG.md has no section ## [{version}]"
    );
}

/// The README's table of what each committed target is tested with names, per target, the
/// runtimes `tools/gpu-bundle` carries for its major: the oldest and the newest pinned runtime
/// wheel of the lock, and the stub driver's range, the first and the last pinned target.
#[test]
fn the_readme_tested_versions_are_the_locks_oldest_and_newest() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lock = std::fs::read_to_string(root.join("generator/inputs.lock")).unwrap();
    // (target, runtime version) of every `target` line, in the lock's order (oldest first).
    let pinned: Vec<(String, String)> = lock
        .lines()
        .filter_map(|l| l.strip_prefix("target "))
        .map(|l| {
            let mut f = l.split_whitespace();
            let target = f.next().unwrap().to_owned();
            let runtime = f.next().unwrap().split_once("==").unwrap().1.to_owned();
            (target, runtime)
        })
        .collect();
    let section = readme.split("\n## Targets\n").nth(1).unwrap();
    let rows: Vec<Vec<String>> = section
        .lines()
        .skip_while(|l| !l.starts_with("| target | on the GPU"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    let listed = readme_targets(&readme);
    assert_eq!(
        rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        listed.keys().cloned().collect::<Vec<_>>(),
        "one row per committed target"
    );
    let first = &pinned.first().unwrap().0;
    let last = &pinned.last().unwrap().0;
    for row in &rows {
        let major = row[0].split('.').next().unwrap();
        let of_major: Vec<&String> = pinned
            .iter()
            .filter(|(t, _)| t.split('.').next() == Some(major))
            .map(|(_, r)| r)
            .collect();
        assert_eq!(
            row[1],
            format!(
                "runtimes {} and {}",
                of_major.first().unwrap(),
                of_major.last().unwrap()
            ),
            "the runtimes of {}",
            row[0]
        );
        assert_eq!(
            row[2],
            format!("drivers {first} to {last}"),
            "the stub's drivers"
        );
    }
}

/// The commands `cargo xtask --help` lists, each named once in the xtask's module docs and in its
/// manifest's description: the list and the description are the commands there are.
#[test]
fn the_xtask_commands_are_each_named_once_in_its_docs_and_description() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let commands: BTreeSet<String> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect();
    assert!(commands.len() >= 12, "{help}");

    let main = std::fs::read_to_string(workspace().join("xtask/src/main.rs")).unwrap();
    let listed: Vec<String> = main
        .lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .map(|l| l.split([' ', '`']).next().unwrap().to_owned())
        .collect();
    let once: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        once.len(),
        "xtask/src/main.rs lists a command twice: {listed:?}"
    );
    assert_eq!(
        once, commands,
        "the commands xtask/src/main.rs's docs list are not those of cargo xtask --help"
    );

    let manifest = std::fs::read_to_string(workspace().join("xtask/Cargo.toml")).unwrap();
    let description = manifest
        .lines()
        .find_map(|l| l.strip_prefix("description = \""))
        .and_then(|d| d.strip_suffix(".\""))
        .expect("xtask/Cargo.toml has a description");
    let named: BTreeSet<String> = description
        .split_once("cargo xtask ")
        .expect("the description names the commands after `cargo xtask `")
        .1
        .split(", ")
        .flat_map(|part| part.split(" and "))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        named, commands,
        "the commands xtask/Cargo.toml's description names are not those of cargo xtask --help"
    );
}
