//! Doxygen to rustdoc Markdown: turns the CUDA headers' doc comments (as bindgen hands them over,
//! comment markers stripped) into the Markdown of the generated items' docs, with `# Parameters`,
//! `# Returns` and `# See also` sections and intra-doc links to the items of the same file.
//!
//! Hand-written rather than a crate: `doxygen-rs` (the one crate for this) calls itself
//! experimental, panics on input it cannot parse, and cannot know which items a generated file
//! holds, so it would emit links that break; the CUDA headers also need their own house macros
//! (`\notefnerr`, `\note_null_stream`) dropped and their HTML lists turned into Markdown.

use std::collections::BTreeMap;

/// The items a doc comment may link to: C name → intra-doc path, for the items of one file.
#[derive(Clone, Debug, Default)]
pub struct Links {
    paths: BTreeMap<String, Link>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Link {
    /// A function at the file's top level: `[`name`]`, `[`name()`]`.
    Function,
    /// Another item at the file's top level: `[`name`]`.
    Item,
    /// An associated item, linked through its path (`CUstream_flags_enum::CU_STREAM_DEFAULT`).
    Path(String),
}

impl Links {
    /// The items of a file: its top-level named items and the associated constants of its
    /// inherent impls (the constants of bindgen's newtype enums).
    pub fn of_items<'a>(items: impl IntoIterator<Item = &'a syn::Item>) -> Self {
        let mut links = Links::default();
        let mut associated = Vec::new();
        for item in items {
            let (name, link) = match item {
                syn::Item::Fn(f) => (f.sig.ident.to_string(), Link::Function),
                syn::Item::Struct(s) => (s.ident.to_string(), Link::Item),
                syn::Item::Union(u) => (u.ident.to_string(), Link::Item),
                syn::Item::Enum(e) => (e.ident.to_string(), Link::Item),
                syn::Item::Type(t) => (t.ident.to_string(), Link::Item),
                syn::Item::Const(c) => (c.ident.to_string(), Link::Item),
                syn::Item::Static(s) => (s.ident.to_string(), Link::Item),
                syn::Item::Use(u) => match &u.tree {
                    syn::UseTree::Path(p) => match &*p.tree {
                        syn::UseTree::Rename(r) => (r.rename.to_string(), Link::Item),
                        _ => continue,
                    },
                    _ => continue,
                },
                syn::Item::Impl(i) if i.trait_.is_none() => {
                    if let syn::Type::Path(p) = &*i.self_ty
                        && let Some(ty) = p.path.get_ident()
                    {
                        for member in &i.items {
                            if let syn::ImplItem::Const(c) = member {
                                associated
                                    .push((c.ident.to_string(), format!("{ty}::{}", c.ident)));
                            }
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            links.paths.insert(name, link);
        }
        for (name, path) in associated {
            links.paths.entry(name).or_insert(Link::Path(path));
        }
        links
    }

    /// The types and constants of a file ([`crate::model::TypeDef`]), with the enumerators of its
    /// enumerations as associated items.
    pub fn of_types(types: &[crate::model::TypeDef]) -> Self {
        let mut links = Links::default();
        for t in types {
            links.paths.insert(t.name.clone(), Link::Item);
        }
        for t in types {
            if let crate::model::Definition::Enum(e) = &t.definition {
                for v in &e.values {
                    (links.paths.entry(v.name.clone()))
                        .or_insert_with(|| Link::Path(format!("{}::{}", t.name, v.name)));
                }
            }
        }
        links
    }

    /// Adds a function (a wrapper, or an alias of one).
    pub fn add_function(&mut self, name: &str) {
        self.paths.insert(name.to_owned(), Link::Function);
    }
}

/// Converts one Doxygen comment to Markdown lines (no leading space; blank lines empty).
pub fn to_markdown(doxygen: &str, links: &Links) -> Vec<String> {
    let parsed = parse(doxygen);
    let mut out = Out::default();
    out.paragraph(flow(&parsed.brief, links));
    for block in &parsed.body {
        match block {
            Block::Text(lines) => out.paragraph(flow(lines, links)),
            Block::Code(lines) => {
                let mut fenced = vec!["```text".to_owned()];
                fenced.extend(unindent(lines));
                fenced.push("```".to_owned());
                out.paragraph(fenced);
            }
            Block::Labeled(label, lines) => {
                let mut text = flow(lines, links);
                if let Some(first) = text.first_mut() {
                    *first = format!("**{label}:** {first}");
                }
                out.paragraph(text);
            }
        }
    }
    if !parsed.params.is_empty() {
        out.paragraph(vec!["# Parameters".to_owned()]);
        let mut items = Vec::new();
        for p in &parsed.params {
            let text = flow(&p.text, links);
            let mut head = format!("* `{}`", rust_param_name(&p.name));
            if let Some(dir) = &p.direction {
                head.push_str(&format!(" ({dir})"));
            }
            let mut lines = text.into_iter();
            match lines.next() {
                Some(first) => items.push(format!("{head} - {first}")),
                None => items.push(head),
            }
            items.extend(lines.map(|l| indent(&l, 2)));
        }
        out.paragraph(items);
    }
    for (heading, parts) in [
        ("# Returns", &parsed.returns),
        ("# See also", &parsed.see_also),
    ] {
        let parts: Vec<Vec<String>> = parts
            .iter()
            .map(|p| flow(p, links))
            .filter(|p| !p.is_empty())
            .collect();
        if !parts.is_empty() {
            out.paragraph(vec![heading.to_owned()]);
            for p in parts {
                out.paragraph(p);
            }
        }
    }
    out.lines
}

/// The note of the `#[deprecated]` of a declaration that the header marks deprecated
/// (`__CUDA_DEPRECATED`, which carries no message): the text of its Doxygen `\deprecated`
/// paragraph, or of the paragraph right after an empty one (`\deprecated` on a line of its own,
/// as `cuda.h` writes it), on one line; where the comment says no more than `\deprecated` (most
/// do: the attribute itself carries no message), a sentence naming the header that marks it.
pub fn deprecation_note(doxygen: &[String], header: &str) -> String {
    let parsed = parse(&doxygen.join("\n"));
    let links = Links::default();
    let mut blocks = parsed.body.iter();
    let mut text = Vec::new();
    while let Some(block) = blocks.next() {
        if let Block::Labeled("Deprecated", lines) = block {
            text = flow(lines, &links);
            // The paragraph after an empty `\deprecated`, if it speaks of the deprecation.
            if text.iter().all(|l| l.trim().is_empty())
                && let Some(Block::Text(next)) = blocks.next()
                && next.iter().any(|l| l.to_lowercase().contains("deprecat"))
            {
                text = flow(next, &links);
            }
            break;
        }
    }
    let note = text
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if note.is_empty() {
        format!("{header} marks this function deprecated (`__CUDA_DEPRECATED`)")
    } else {
        note
    }
}

/// Markdown lines with blank lines between paragraphs.
#[derive(Default)]
struct Out {
    lines: Vec<String>,
}

impl Out {
    fn paragraph(&mut self, lines: Vec<String>) {
        if lines.iter().all(|l| l.is_empty()) {
            return;
        }
        if !self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.lines.extend(lines);
    }
}

fn indent(line: &str, by: usize) -> String {
    if line.is_empty() {
        String::new()
    } else {
        format!("{}{line}", " ".repeat(by))
    }
}

/// Code lines without their common indentation.
fn unindent(lines: &[String]) -> Vec<String> {
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(common..).unwrap_or("").trim_end().to_owned())
        .collect()
}

/// A Doxygen comment taken apart into its sections.
#[derive(Debug, Default)]
struct Parsed {
    brief: Vec<String>,
    body: Vec<Block>,
    params: Vec<Param>,
    returns: Vec<Vec<String>>,
    see_also: Vec<Vec<String>>,
}

#[derive(Debug)]
enum Block {
    Text(Vec<String>),
    Code(Vec<String>),
    Labeled(&'static str, Vec<String>),
}

#[derive(Debug)]
struct Param {
    name: String,
    direction: Option<String>,
    text: Vec<String>,
}

/// Where the lines of a comment go, as its commands open and blank lines close sections.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Body,
    Brief,
    Param,
    Returns,
    SeeAlso,
    Labeled,
}

/// Whether `word` (a command without its backslash) is one of the headers' house macros: a
/// single token that Doxygen expands from the toolkit's configuration (`\notefnerr`,
/// `\note_null_stream`, `\link_sync_behavior`), whose text is not in the headers.
fn is_house_macro(word: &str) -> bool {
    (word.starts_with("note") && word != "note" && word != "notes") || word.starts_with("link_")
}

/// Commands that only structure Doxygen's own output (groups, pages) and carry nothing to read
/// on one item.
fn is_structural(word: &str) -> bool {
    matches!(
        word,
        "ingroup"
            | "addtogroup"
            | "defgroup"
            | "cond"
            | "endcond"
            | "typedef"
            | "struct"
            | "file"
            | "page"
            | "section"
            | "subsection"
            | "xmlonly"
            | "endxmlonly"
            | "latexonly"
            | "endlatexonly"
            | "{"
            | "}"
    )
}

/// The Rust name of a C parameter: bindgen appends `_` to a name that is a Rust keyword (`fn`
/// becomes `fn_`), and the docs name the parameter as the wrapper does.
fn rust_param_name(c: &str) -> String {
    if syn::parse_str::<syn::Ident>(c).is_err()
        && syn::parse_str::<syn::Ident>(&format!("{c}_")).is_ok()
    {
        format!("{c}_")
    } else {
        c.to_owned()
    }
}

/// The command a line starts with (`\param[in] x` → `("param", "[in] x")`).
fn command(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('\\').or_else(|| line.strip_prefix('@'))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    Some((&rest[..end], &rest[end..]))
}

/// Splits a line at `\code` and `\endcode`, so that each stands on a line of its own.
fn split_code_commands(line: &str, out: &mut Vec<String>) {
    let mut rest = line;
    loop {
        let at = [rest.find("\\code"), rest.find("\\endcode")]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = at else {
            out.push(rest.to_owned());
            return;
        };
        let word_len = if rest[at..].starts_with("\\code") {
            5
        } else {
            8
        };
        // `\code{.c}` names a language; the block is plain text here.
        let mut end = at + word_len;
        if rest[end..].starts_with('{')
            && let Some(close) = rest[end..].find('}')
        {
            end += close + 1;
        }
        if !rest[..at].trim().is_empty() {
            out.push(rest[..at].to_owned());
        }
        out.push(rest[at..at + word_len].to_owned());
        rest = &rest[end..];
        if rest.trim().is_empty() {
            return;
        }
    }
}

fn parse(doxygen: &str) -> Parsed {
    let text = doxygen.trim_start();
    // A member comment (`/**< ... */`) keeps its `<`.
    let text = text.strip_prefix('<').unwrap_or(text);
    let mut lines = Vec::new();
    for line in text.lines() {
        split_code_commands(line, &mut lines);
    }

    let mut parsed = Parsed::default();
    let mut section = Section::Body;
    let mut code: Option<Vec<String>> = None;
    for raw in &lines {
        let line = raw.trim();
        if let Some(block) = &mut code {
            if line == "\\endcode" {
                parsed.body.push(Block::Code(std::mem::take(block)));
                code = None;
            } else {
                block.push(raw.clone());
            }
            continue;
        }
        if line == "\\code" {
            code = Some(Vec::new());
            section = Section::Body;
            continue;
        }
        if line.is_empty() {
            section = Section::Body;
            parsed.body.push(Block::Text(Vec::new()));
            continue;
        }
        let mut text = line;
        if let Some((word, rest)) = command(line) {
            let rest = rest.trim();
            match word {
                w if is_house_macro(w) && rest.is_empty() => {
                    section = Section::Body;
                    continue;
                }
                w if is_structural(w) => continue,
                "brief" | "short" => {
                    section = Section::Brief;
                    text = rest;
                }
                "details" => {
                    section = Section::Body;
                    text = rest;
                }
                "param" | "tparam" => {
                    let (direction, rest) = match rest.strip_prefix('[') {
                        Some(r) => match r.split_once(']') {
                            Some((dir, r)) => (Some(dir.trim().to_owned()), r.trim_start()),
                            None => (None, rest),
                        },
                        None => (None, rest),
                    };
                    let (name, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    let rest = rest.trim_start();
                    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
                    parsed.params.push(Param {
                        name: name.to_owned(),
                        direction,
                        text: vec![rest.to_owned()],
                    });
                    section = Section::Param;
                    continue;
                }
                "return" | "returns" | "result" | "retval" => {
                    parsed.returns.push(Vec::new());
                    section = Section::Returns;
                    text = rest;
                }
                "sa" | "see" => {
                    parsed.see_also.push(Vec::new());
                    section = Section::SeeAlso;
                    text = rest;
                }
                "note" | "notes" | "warning" | "deprecated" | "remark" | "remarks"
                | "attention" | "par" | "pre" | "post" => {
                    let label = match word {
                        "note" | "notes" => "Note",
                        "warning" => "Warning",
                        "deprecated" => "Deprecated",
                        "remark" | "remarks" => "Remark",
                        "attention" => "Attention",
                        "pre" => "Precondition",
                        "post" => "Postcondition",
                        // `\par Title` opens a paragraph with a title.
                        _ => "",
                    };
                    section = Section::Labeled;
                    if label.is_empty() {
                        parsed.body.push(Block::Labeled("", Vec::new()));
                    } else {
                        parsed.body.push(Block::Labeled(label, Vec::new()));
                    }
                    text = rest;
                }
                _ => {}
            }
        }
        let target = match section {
            Section::Brief => &mut parsed.brief,
            Section::Param => &mut parsed.params.last_mut().expect("a param is open").text,
            Section::Returns => parsed.returns.last_mut().expect("a return is open"),
            Section::SeeAlso => parsed.see_also.last_mut().expect("a see-also is open"),
            Section::Labeled => match parsed.body.last_mut() {
                Some(Block::Labeled(_, lines)) => lines,
                _ => unreachable!("a labeled block is open"),
            },
            Section::Body => {
                if !matches!(parsed.body.last(), Some(Block::Text(_))) {
                    parsed.body.push(Block::Text(Vec::new()));
                }
                match parsed.body.last_mut() {
                    Some(Block::Text(lines)) => lines,
                    _ => unreachable!("pushed above"),
                }
            }
        };
        if !text.is_empty() {
            target.push(text.to_owned());
        }
    }
    if let Some(block) = code {
        parsed.body.push(Block::Code(block));
    }
    // `\par` without a label: its title becomes bold.
    for block in &mut parsed.body {
        if let Block::Labeled("", lines) = block {
            if let Some(first) = lines.first_mut() {
                *first = format!("<b>{first}</b>");
            }
            *block = Block::Text(std::mem::take(lines));
        }
    }
    parsed
}

/// Lays out the lines of one paragraph (which may hold HTML lists) as Markdown lines.
fn flow(lines: &[String], links: &Links) -> Vec<String> {
    let text = lines.join("\n");
    let mut layout = Layout::default();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        match next_block_tag(rest) {
            Some((at, len, tag)) => {
                layout.text(&inline(&rest[..at], links));
                layout.tag(tag);
                rest = &rest[at + len..];
            }
            None => {
                layout.text(&inline(rest, links));
                rest = "";
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for line in layout.lines {
        if line.is_empty() && out.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    ListOpen { ordered: bool },
    ListClose,
    Item,
    ItemClose,
    Break,
}

/// The first HTML tag in `s` that structures blocks: its offset, length and meaning.
fn next_block_tag(s: &str) -> Option<(usize, usize, Tag)> {
    let mut from = 0;
    while let Some(at) = s[from..].find('<').map(|i| i + from) {
        let len = s[at..].find('>').map(|i| i + 1)?;
        let name: String = s[at + 1..at + len - 1]
            .trim()
            .trim_end_matches('/')
            .trim()
            .to_ascii_lowercase();
        let tag = match name.as_str() {
            "ul" => Some(Tag::ListOpen { ordered: false }),
            "ol" => Some(Tag::ListOpen { ordered: true }),
            "/ul" | "/ol" => Some(Tag::ListClose),
            "li" => Some(Tag::Item),
            "/li" => Some(Tag::ItemClose),
            "br" | "p" | "/p" => Some(Tag::Break),
            _ => None,
        };
        if let Some(tag) = tag {
            return Some((at, len, tag));
        }
        from = at + 1;
    }
    None
}

/// Places text in lists and paragraphs.
#[derive(Default)]
struct Layout {
    lines: Vec<String>,
    /// The open lists: whether each is ordered, and its marker width.
    lists: Vec<(bool, usize)>,
    /// An item was opened and its first line is still to come.
    item_pending: bool,
    /// A `- ` or `1. ` item outside HTML lists is open: its continuation indent.
    markdown_item: Option<usize>,
}

impl Layout {
    fn content_indent(&self) -> usize {
        self.lists.iter().map(|(_, w)| w).sum()
    }

    fn text(&mut self, text: &str) {
        for line in text.split('\n') {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if !self.lists.is_empty() {
                let (ordered, width) = *self.lists.last().expect("non-empty");
                let outer = self.content_indent() - width;
                if self.item_pending {
                    self.item_pending = false;
                    let marker = if ordered { "1. " } else { "* " };
                    self.lines
                        .push(format!("{}{marker}{line}", " ".repeat(outer)));
                } else {
                    let at = self.content_indent();
                    self.lines.push(indent(&escape_line_start(line), at));
                }
                continue;
            }
            if let Some(width) = markdown_marker(line) {
                // One space after the marker (`-  x` → `- x`), so continuations line up.
                let (marker, rest) = line.split_at(width - 1);
                self.markdown_item = Some(width);
                self.lines.push(format!("{marker} {}", rest.trim_start()));
            } else if let Some(width) = self.markdown_item {
                self.lines.push(indent(&escape_line_start(line), width));
            } else {
                self.lines.push(escape_line_start(line));
            }
        }
    }

    fn tag(&mut self, tag: Tag) {
        match tag {
            Tag::ListOpen { ordered } => {
                if self.lists.is_empty() {
                    self.markdown_item = None;
                    self.lines.push(String::new());
                }
                self.lists.push((ordered, if ordered { 3 } else { 2 }));
                self.item_pending = false;
            }
            Tag::ListClose => {
                self.lists.pop();
                self.item_pending = false;
                if self.lists.is_empty() {
                    self.lines.push(String::new());
                }
            }
            Tag::Item => {
                if !self.lists.is_empty() {
                    self.item_pending = true;
                }
            }
            Tag::ItemClose => self.item_pending = false,
            Tag::Break => {
                if self.lists.is_empty() {
                    self.markdown_item = None;
                }
                self.lines.push(String::new());
            }
        }
    }
}

/// The width of the list marker a line starts with (`- `, `1. `), if any.
fn markdown_marker(line: &str) -> Option<usize> {
    if line.starts_with("- ") {
        return Some(2);
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && (line[digits..].starts_with(". ") || line[digits..].starts_with(") ")) {
        return Some(digits + 2);
    }
    None
}

/// Escapes what Markdown would read as block syntax at the start of a line that is not meant
/// as such: headings, block quotes (already `&gt;`), `+` items, and rules.
fn escape_line_start(line: &str) -> String {
    let first = line.chars().next();
    let is_rule = line.len() >= 3 && line.chars().all(|c| matches!(c, '-' | '=' | '_' | ' '));
    match first {
        Some('#' | '+' | '=' | '-' | '_') if is_rule || matches!(first, Some('#' | '+')) => {
            format!("\\{line}")
        }
        _ if markdown_marker(line).is_some() => format!("\\{line}"),
        _ => line.to_owned(),
    }
}

/// Converts Doxygen's inline commands and HTML to Markdown, escaping the rest.
fn inline(text: &str, links: &Links) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev = i.checked_sub(1).map(|p| chars[p]);
        match c {
            '\\' | '@' if chars.get(i + 1).is_some_and(|n| n.is_ascii_alphabetic()) => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_')
                {
                    end += 1;
                }
                let word: String = chars[start..end].iter().collect();
                if c == '@' && prev.is_some_and(|p| !p.is_whitespace()) {
                    // An address or a decorated name, not a command.
                    out.push('@');
                    i += 1;
                    continue;
                }
                i = end;
                match word.as_str() {
                    "p" | "c" => {
                        let (token, next) = argument(&chars, i);
                        i = next;
                        if !token.is_empty() {
                            out.push_str(&code(&token));
                        }
                    }
                    "e" | "em" | "a" => {
                        let (token, next) = argument(&chars, i);
                        i = next;
                        out.push('*');
                        out.push_str(&escape(&token));
                        out.push('*');
                    }
                    "b" => {
                        let (token, next) = argument(&chars, i);
                        i = next;
                        out.push_str("**");
                        out.push_str(&escape(&token));
                        out.push_str("**");
                    }
                    "n" => out.push('\n'),
                    "ref" | "link" => {
                        let (rendered, next) = reference(&chars, i, links);
                        i = next;
                        out.push_str(&rendered);
                    }
                    "endlink" => {}
                    w if is_house_macro(w) || is_structural(w) => {}
                    // `\phEvent`: a `\p` with its space lost, in some headers.
                    w if w.len() > 1
                        && w.starts_with('p')
                        && w[1..].starts_with(|c: char| c.is_ascii_lowercase()) =>
                    {
                        let (token, next) = argument(&chars, i);
                        i = next;
                        out.push_str(&code(&format!("{}{token}", &w[1..])));
                    }
                    // An unknown command: its name as text, so nothing reads as an escape.
                    w => out.push_str(&escape(w)),
                }
            }
            '\\' => {
                // Doxygen's escapes of one character (`\<`, `\&`, `\\`, `\::`); an escaped
                // backslash before letters is a C escape in prose (`\\n`): code, `\n`.
                if chars.get(i + 1) == Some(&'\\')
                    && chars.get(i + 2).is_some_and(|c| c.is_ascii_alphabetic())
                {
                    let letters: String = chars[i + 2..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .collect();
                    i += 2 + letters.chars().count();
                    out.push_str(&code(&format!("\\{letters}")));
                    continue;
                }
                match chars.get(i + 1) {
                    Some(&n) if !n.is_whitespace() => {
                        push_escaped(&mut out, n);
                        i += 2;
                    }
                    _ => {
                        out.push_str("\\\\");
                        i += 1;
                    }
                }
            }
            ':' if chars.get(i + 1) == Some(&':')
                && chars
                    .get(i + 2)
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
                && !prev.is_some_and(|p| p.is_alphanumeric() || p == '_' || p == ':') =>
            {
                let (path, next) = path(&chars, i + 2);
                i = next;
                let calls = chars.get(i) == Some(&'(') && chars.get(i + 1) == Some(&')');
                if calls {
                    i += 2;
                }
                let rendered = link(&path, calls, links);
                // What follows a shortcut link must not extend it (`[x](...)`, `[x]: ...`).
                if rendered.ends_with(']') && matches!(chars.get(i), Some('(' | ':' | '[')) {
                    out.push_str(&rendered);
                    out.push('\\');
                } else {
                    out.push_str(&rendered);
                }
            }
            '<' => {
                let rest: String = chars[i..chars.len().min(i + 12)].iter().collect();
                let tag = rest
                    .find('>')
                    .map(|e| rest[1..e].trim().to_ascii_lowercase());
                let replacement = match tag.as_deref() {
                    Some("b" | "/b" | "strong" | "/strong") => Some("**"),
                    Some("i" | "/i" | "em" | "/em") => Some("*"),
                    Some("tt" | "/tt" | "code" | "/code") => Some("`"),
                    Some("small" | "/small" | "sup" | "/sup" | "sub" | "/sub") => Some(""),
                    _ => None,
                };
                match (replacement, tag) {
                    (Some(r), Some(tag)) => {
                        out.push_str(r);
                        i += tag.chars().count() + 2;
                        while i < chars.len() && chars[i - 1] != '>' {
                            i += 1;
                        }
                    }
                    _ => {
                        out.push_str("&lt;");
                        i += 1;
                    }
                }
            }
            'h' if !prev.is_some_and(|p| p.is_alphanumeric())
                && (starts_with(&chars, i, "http://") || starts_with(&chars, i, "https://")) =>
            {
                let mut end = i;
                while end < chars.len() && !chars[end].is_whitespace() && chars[end] != '>' {
                    end += 1;
                }
                while end > i && matches!(chars[end - 1], '.' | ',' | ')' | ';' | ':' | '"') {
                    end -= 1;
                }
                out.push('<');
                out.extend(&chars[i..end]);
                out.push('>');
                i = end;
            }
            '%' if chars.get(i + 1).is_some_and(|n| n.is_alphabetic())
                && !prev.is_some_and(|p| p.is_alphanumeric()) =>
            {
                // Doxygen's `%word`: the word, not linked.
                i += 1;
            }
            _ => {
                push_escaped(&mut out, c);
                i += 1;
            }
        }
    }
    out
}

fn starts_with(chars: &[char], at: usize, s: &str) -> bool {
    (at..).zip(s.chars()).all(|(i, c)| chars.get(i) == Some(&c))
}

/// Escapes characters Markdown or rustdoc would read as syntax: links, HTML, emphasis, code.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    s.chars().for_each(|c| push_escaped(&mut out, c));
    out
}

/// [`escape`] of one character, appended to `out`.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '[' | ']' | '*' | '`' | '\\' => {
            out.push('\\');
            out.push(c);
        }
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        _ => out.push(c),
    }
}

/// Inline code, with a fence that its content cannot close.
fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

/// The argument of `\p`, `\e` and the like: the next word, less the punctuation after it.
fn argument(chars: &[char], mut i: usize) -> (String, usize) {
    while i < chars.len() && chars[i] == ' ' {
        i += 1;
    }
    let start = i;
    while i < chars.len() && !chars[i].is_whitespace() {
        i += 1;
    }
    let mut end = i;
    while let Some(&last) = end.checked_sub(1).filter(|&e| e > start).map(|e| &chars[e]) {
        let opens = chars[start..end].iter().filter(|&&c| c == '(').count();
        let closes = chars[start..end].iter().filter(|&&c| c == ')').count();
        let strip = matches!(last, '.' | ',' | ';' | ':' | '!' | '?' | '"' | '\'')
            || (last == ')' && closes > opens);
        if !strip {
            break;
        }
        end -= 1;
    }
    // A `\[` inside an argument is Doxygen's escape of `[`.
    let token: String = chars[start..end]
        .iter()
        .collect::<String>()
        .replace("\\[", "[")
        .replace("\\]", "]");
    (token, end)
}

/// A C name with `::` members: `cudaDeviceAttr::cudaDevAttrKernelExecTimeout`.
fn path(chars: &[char], mut i: usize) -> (String, usize) {
    let mut path = String::new();
    loop {
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            path.push(chars[i]);
            i += 1;
        }
        if starts_with(chars, i, "::")
            && chars
                .get(i + 2)
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
        {
            path.push_str("::");
            i += 2;
        } else {
            return (path, i);
        }
    }
}

/// A reference to a C item: an intra-doc link when the file holds the item, else code.
fn link(path: &str, calls: bool, links: &Links) -> String {
    let name = path.rsplit("::").next().unwrap_or(path);
    let shown = if calls {
        format!("{path}()")
    } else {
        path.to_owned()
    };
    match links.paths.get(name) {
        Some(Link::Function) if path == name => format!("[{}]", code(&shown)),
        Some(Link::Item) if path == name && !calls => format!("[{}]", code(&shown)),
        Some(Link::Function | Link::Item) => format!("[{}]({name})", code(&shown)),
        Some(Link::Path(target)) => format!("[{}]({target})", code(&shown)),
        None => code(&shown),
    }
}

/// `\ref target ["text"]`: the text when given (the target's name in it as code), else the
/// target as a reference.
fn reference(chars: &[char], mut i: usize, links: &Links) -> (String, usize) {
    while i < chars.len() && chars[i] == ' ' {
        i += 1;
    }
    let explicit_root = starts_with(chars, i, "::");
    if explicit_root {
        i += 2;
    }
    let (target, mut next) = path(chars, i);
    // A C++ overload's signature: `::cudaEventCreate(cudaEvent_t*, unsigned int)`.
    let mut signature = false;
    if chars.get(next) == Some(&'(') {
        let mut depth = 0;
        let mut j = next;
        while j < chars.len() {
            match chars[j] {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        next = j;
        signature = true;
    }
    let mut j = next;
    while j < chars.len() && chars[j].is_whitespace() {
        j += 1;
    }
    if chars.get(j) == Some(&'"')
        && let Some(close) = chars[j + 1..].iter().position(|&c| c == '"')
    {
        let text: String = chars[j + 1..j + 1 + close].iter().collect();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let base = target.rsplit("::").next().unwrap_or(&target);
        let rendered = match text.strip_prefix(base) {
            Some(rest) if !base.is_empty() => format!("{}{}", code(base), escape(rest)),
            _ => escape(&text),
        };
        return (rendered, j + 1 + close + 1);
    }
    if target.is_empty() {
        return (String::new(), next);
    }
    let rendered = if signature {
        code(&target)
    } else {
        link(&target, false, links)
    };
    (rendered, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escaped_backslash_before_letters_is_a_c_escape_in_code() {
        let md = to_markdown("\\brief Ends with a newline \\\\n only.", &Links::default());
        assert_eq!(md, ["Ends with a newline `\\n` only."]);
    }

    #[test]
    fn a_deprecation_note_is_the_deprecated_paragraph_or_names_the_header() {
        let lines = |t: &str| t.lines().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            deprecation_note(
                &lines(
                    "\\brief Attach\n\n\\deprecated\n\nNote that this function is deprecated and should not be used.\n\nMore."
                ),
                "cuda.h"
            ),
            "Note that this function is deprecated and should not be used."
        );
        assert_eq!(
            deprecation_note(
                &lines(
                    "\\brief X\n\n\\deprecated This was deprecated as of CUDA 5.0 and\nreplaced by ::cuY()."
                ),
                "cuda.h"
            ),
            "This was deprecated as of CUDA 5.0 and replaced by `cuY()`."
        );
        // A bare `\deprecated` followed by the function's description says nothing of it.
        assert_eq!(
            deprecation_note(
                &lines("\\brief X\n\n\\deprecated\n\nReturns the bank size."),
                "cuda_runtime_api.h"
            ),
            "cuda_runtime_api.h marks this function deprecated (`__CUDA_DEPRECATED`)"
        );
    }

    fn links(functions: &[&str], items: &[&str]) -> Links {
        let mut links = Links::default();
        for f in functions {
            links.add_function(f);
        }
        for i in items {
            links.paths.insert((*i).to_owned(), Link::Item);
        }
        links
    }

    /// The comment of `cuLaunchHostFunc` in the 13.5 `cuda.h`, as bindgen hands it over.
    const LAUNCH_HOST_FUNC: &str = r#"\brief Enqueues a host function call in a stream

Enqueues a host function to run in a stream.  The function will be called
after currently enqueued work and will block work added after it.

The host function must not make any CUDA API calls.  Attempting to use a
CUDA API may result in ::CUDA_ERROR_NOT_PERMITTED, but this is not required.
The host function must not perform any synchronization that may depend on
outstanding CUDA work not mandated to run earlier.  Host functions without a
mandated order (such as in independent streams) execute in undefined order
and may be serialized.

For the purposes of Unified Memory, execution makes a number of guarantees:
<ul>
  <li>The stream is considered idle for the duration of the function's
  execution.  Thus, for example, the function may always use memory attached
  to the stream it was enqueued in.</li>
  <li>The start of execution of the function has the same effect as
  synchronizing an event recorded in the same stream immediately prior to
  the function.  It thus synchronizes streams which have been "joined"
  prior to the function.</li>
</ul>

Note that, in contrast to ::cuStreamAddCallback, the function will not be
called in the event of an error in the CUDA context.

\param hStream  - Stream to enqueue function call in
\param fn       - The function to call once preceding stream operations are complete
\param userData - User-specified data to be passed to the function

\return
::CUDA_SUCCESS,
::CUDA_ERROR_DEINITIALIZED,
::CUDA_ERROR_NOT_SUPPORTED
\note_null_stream
\notefnerr

\sa ::cuStreamCreate,
::cuStreamQuery,
::cuStreamAddCallback"#;

    #[test]
    fn converts_the_comment_of_cu_launch_host_func() {
        let links = links(
            &["cuLaunchHostFunc", "cuStreamAddCallback", "cuStreamQuery"],
            &[],
        );
        let md = to_markdown(LAUNCH_HOST_FUNC, &links).join("\n");
        let expected = r#"Enqueues a host function call in a stream

Enqueues a host function to run in a stream.  The function will be called
after currently enqueued work and will block work added after it.

The host function must not make any CUDA API calls.  Attempting to use a
CUDA API may result in `CUDA_ERROR_NOT_PERMITTED`, but this is not required.
The host function must not perform any synchronization that may depend on
outstanding CUDA work not mandated to run earlier.  Host functions without a
mandated order (such as in independent streams) execute in undefined order
and may be serialized.

For the purposes of Unified Memory, execution makes a number of guarantees:

* The stream is considered idle for the duration of the function's
  execution.  Thus, for example, the function may always use memory attached
  to the stream it was enqueued in.
* The start of execution of the function has the same effect as
  synchronizing an event recorded in the same stream immediately prior to
  the function.  It thus synchronizes streams which have been "joined"
  prior to the function.

Note that, in contrast to [`cuStreamAddCallback`], the function will not be
called in the event of an error in the CUDA context.

# Parameters

* `hStream` - Stream to enqueue function call in
* `fn_` - The function to call once preceding stream operations are complete
* `userData` - User-specified data to be passed to the function

# Returns

`CUDA_SUCCESS`,
`CUDA_ERROR_DEINITIALIZED`,
`CUDA_ERROR_NOT_SUPPORTED`

# See also

`cuStreamCreate`,
[`cuStreamQuery`],
[`cuStreamAddCallback`]"#;
        assert_eq!(md, expected);
    }

    /// A `\param` block with continuation lines, from `cuGetProcAddress` (13.5 `cuda.h`).
    #[test]
    fn keeps_continuation_lines_in_their_parameter() {
        let comment = r"\param symbol - The base name of the driver API function to look for. As an example,
for the driver API ::cuMemAlloc_v2, \p symbol would be cuMemAlloc and
\p cudaVersion would be the ABI compatible CUDA version for the _v2 variant.
\param pfn - Location to return the function pointer to the requested driver function
\param flags - Flags to specify search options.";
        let md = to_markdown(comment, &links(&[], &[])).join("\n");
        assert_eq!(
            md,
            "# Parameters

* `symbol` - The base name of the driver API function to look for. As an example,
  for the driver API `cuMemAlloc_v2`, `symbol` would be cuMemAlloc and
  `cudaVersion` would be the ABI compatible CUDA version for the _v2 variant.
* `pfn` - Location to return the function pointer to the requested driver function
* `flags` - Flags to specify search options."
        );
    }

    /// A `\return` list with links to the items of the file, and `::x()` (13.5
    /// `cuda_runtime_api.h`, `cudaGetLastError`).
    #[test]
    fn renders_returns_as_codes_and_links() {
        let comment = r"\brief Returns the last error from a runtime call

\return
::cudaSuccess,
::cudaErrorMissingConfiguration
\notefnerr
\note_init_rt

\sa ::cudaPeekAtLastError(), ::cudaError_t";
        let links = links(&["cudaPeekAtLastError"], &["cudaError_t"]);
        let md = to_markdown(comment, &links).join("\n");
        assert_eq!(
            md,
            "Returns the last error from a runtime call

# Returns

`cudaSuccess`,
`cudaErrorMissingConfiguration`

# See also

[`cudaPeekAtLastError()`], [`cudaError_t`]"
        );
    }

    /// `cuThreadExchangeStreamCaptureMode`'s `\code` block, which opens mid-line.
    #[test]
    fn fences_code_as_text() {
        let comment = r"Sets the calling thread's stream capture interaction mode to the value contained
in \p *mode, and overwrites \p *mode with the previous mode for the thread. To
facilitate deterministic behavior across function or module boundaries, callers
are encouraged to use this API in a push-pop fashion: \code
    CUstreamCaptureMode mode = desiredMode;
    cuThreadExchangeStreamCaptureMode(&mode);
    ...
    cuThreadExchangeStreamCaptureMode(&mode); // restore previous mode
\endcode

During stream capture (see ::cuStreamBeginCapture), some actions.";
        let md = to_markdown(comment, &links(&["cuStreamBeginCapture"], &[])).join("\n");
        assert_eq!(
            md,
            "Sets the calling thread's stream capture interaction mode to the value contained
in `*mode`, and overwrites `*mode` with the previous mode for the thread. To
facilitate deterministic behavior across function or module boundaries, callers
are encouraged to use this API in a push-pop fashion:

```text
CUstreamCaptureMode mode = desiredMode;
cuThreadExchangeStreamCaptureMode(&mode);
...
cuThreadExchangeStreamCaptureMode(&mode); // restore previous mode
```

During stream capture (see [`cuStreamBeginCapture`]), some actions."
        );
    }

    /// A member comment with `\c`, an escaped index, `<br>` and HTML emphasis
    /// (`CUgraphEdgeData_st::from_port`), and an associated constant as a path.
    #[test]
    fn converts_member_comments_and_inline_html() {
        let comment = r"< Memory visibility (indicated by \c to_port) of \c out[i].
 <br>
 Only <b>kernel</b> nodes use ::CU_GRAPH_KERNEL_NODE_PORT_DEFAULT; see \ref CUDA_MEMOP
 for [details] about <x> and https://docs.nvidia.com/cuda/.";
        let mut links = links(&[], &[]);
        links.paths.insert(
            "CU_GRAPH_KERNEL_NODE_PORT_DEFAULT".to_owned(),
            Link::Path("Port::CU_GRAPH_KERNEL_NODE_PORT_DEFAULT".to_owned()),
        );
        let md = to_markdown(comment, &links).join("\n");
        assert_eq!(
            md,
            "Memory visibility (indicated by `to_port`) of `out[i]`.

Only **kernel** nodes use [`CU_GRAPH_KERNEL_NODE_PORT_DEFAULT`](Port::CU_GRAPH_KERNEL_NODE_PORT_DEFAULT); see `CUDA_MEMOP`
for \\[details\\] about &lt;x&gt; and <https://docs.nvidia.com/cuda/>."
        );
    }

    /// A real `\note` and `\warning` become labelled paragraphs; `\ref` with a text keeps the
    /// text (`cudaEventCreate`'s see-also).
    #[test]
    fn labels_notes_and_keeps_ref_texts() {
        let comment = r#"\note Graph objects are not threadsafe.
\warning This function will be deprecated. Please migrate to ::cuGraphAddNode.

\sa \ref ::cudaEventCreate(cudaEvent_t*, unsigned int) "cudaEventCreate (C++ API)",
::cudaEventQuery"#;
        let md = to_markdown(comment, &links(&[], &[])).join("\n");
        assert_eq!(
            md,
            "**Note:** Graph objects are not threadsafe.

**Warning:** This function will be deprecated. Please migrate to `cuGraphAddNode`.

# See also

`cudaEventCreate` (C++ API),
`cudaEventQuery`"
        );
    }
}
