//! The JSON encoding, written and read by hand (see the module above for the
//! rules). The reader checks the whole text first (syntax, one value, depth),
//! then walks it: a record's fields are found by name, so they may come in
//! any order.

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Pass, Saved, Uint, check_version, malformed};
use crate::error::SnapshotError;
use crate::fallible::{OutOfMemory, TryString};

/// Nesting deeper than this is malformed (serde_json's limit).
const MAX_DEPTH: usize = 128;

/// An object with more fields than this is malformed (no saved form has
/// more than 13): finding duplicates among an object's fields is then cheap.
const MAX_FIELDS: usize = 32;

/// `value` as JSON text, or [`OutOfMemory`] (nothing else can fail).
pub(super) fn write<T: Saved>(value: &mut T) -> Result<String, OutOfMemory> {
    let mut w = Writer { out: TryString::new(), first: true };
    let _ = value.visit(&mut w);
    w.out.finish()
}

/// The value the JSON `text` holds.
pub(super) fn read<T: Saved>(text: &str) -> Result<T, SnapshotError> {
    let value = whole(text)?;
    let mut r = Reader { value: Some(value), name: "snapshot", fields: Vec::new() };
    let mut saved = T::default();
    saved.visit(&mut r)?;
    Ok(saved)
}

/// The length of the list in field `name` of the record `text` holds,
/// after its version is checked (so that a newer snapshot is reported as
/// such, whatever else it holds).
pub(super) fn count(text: &str, name: &str) -> Result<usize, SnapshotError> {
    let value = whole(text)?;
    let fields = entries(value)?;
    let field = |want: &str| {
        let found = fields.iter().find(|(k, _)| k == want).map(|&(_, v)| v);
        found.ok_or_else(|| missing(want))
    };
    let mut r = Reader { value: Some(field("version")?), name: "version", fields: Vec::new() };
    let mut version = 0u32;
    r.uint(&mut version)?;
    check_version(version)?;
    Ok(items(field(name)?, name)?.len())
}

/// The one value `text` holds, checked.
fn whole(text: &str) -> Result<&[u8], SnapshotError> {
    let bytes = text.as_bytes();
    let start = skip_space(bytes, 0);
    let end = scan(bytes, start, 0)?;
    if skip_space(bytes, end) != bytes.len() {
        return Err(malformed("text after the snapshot"));
    }
    Ok(&bytes[start..end])
}

fn skip_space(b: &[u8], mut at: usize) -> usize {
    while matches!(b.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

fn syntax(at: usize) -> SnapshotError {
    malformed(format!("not JSON at byte {at}"))
}

/// Where the value at `at` ends, checking its syntax.
fn scan(b: &[u8], at: usize, depth: usize) -> Result<usize, SnapshotError> {
    match b.get(at) {
        Some(b'"') => scan_string(b, at),
        Some(&open @ (b'{' | b'[')) => {
            if depth == MAX_DEPTH {
                return Err(malformed("nested too deeply"));
            }
            let close = if open == b'{' { b'}' } else { b']' };
            let mut at = skip_space(b, at + 1);
            if b.get(at) == Some(&close) {
                return Ok(at + 1);
            }
            loop {
                if open == b'{' {
                    if b.get(at) != Some(&b'"') {
                        return Err(syntax(at));
                    }
                    at = skip_space(b, scan_string(b, at)?);
                    if b.get(at) != Some(&b':') {
                        return Err(syntax(at));
                    }
                    at = skip_space(b, at + 1);
                }
                at = skip_space(b, scan(b, at, depth + 1)?);
                match b.get(at) {
                    Some(b',') => at = skip_space(b, at + 1),
                    Some(&c) if c == close => return Ok(at + 1),
                    _ => return Err(syntax(at)),
                }
            }
        }
        Some(b'-' | b'0'..=b'9') => {
            let digits = |mut at: usize| {
                let from = at;
                while b.get(at).is_some_and(u8::is_ascii_digit) {
                    at += 1;
                }
                if at == from { Err(syntax(at)) } else { Ok(at) }
            };
            let mut at = if b[at] == b'-' { at + 1 } else { at };
            let end = digits(at)?;
            if b[at] == b'0' && end > at + 1 {
                return Err(syntax(at));
            }
            at = end;
            if b.get(at) == Some(&b'.') {
                at = digits(at + 1)?;
            }
            if matches!(b.get(at), Some(b'e' | b'E')) {
                at += 1;
                if matches!(b.get(at), Some(b'+' | b'-')) {
                    at += 1;
                }
                at = digits(at)?;
            }
            Ok(at)
        }
        _ => ["true", "false", "null"]
            .iter()
            .find(|word| b[at..].starts_with(word.as_bytes()))
            .map(|word| at + word.len())
            .ok_or_else(|| syntax(at)),
    }
}

/// Where the string at `at` ends (after its closing quote), checking its escapes.
fn scan_string(b: &[u8], at: usize) -> Result<usize, SnapshotError> {
    let mut at = at + 1;
    loop {
        match b.get(at) {
            Some(b'"') => return Ok(at + 1),
            Some(b'\\') => {
                at += match b.get(at + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => 2,
                    Some(b'u') if b.get(at + 2..at + 6).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) => 6,
                    _ => return Err(syntax(at)),
                }
            }
            Some(0x20..) => at += 1,
            _ => return Err(syntax(at)),
        }
    }
}

fn hex4(b: &[u8]) -> u32 {
    b.iter().fold(0, |n, &d| n * 16 + (d as char).to_digit(16).unwrap_or(0))
}

/// The text of a checked string value (with its quotes).
fn unescape(b: &[u8]) -> Result<Cow<'_, str>, SnapshotError> {
    let inner = &b[1..b.len() - 1];
    let as_str = |b| core::str::from_utf8(b).map_err(|_| malformed("text is not UTF-8"));
    if !inner.contains(&b'\\') {
        return as_str(inner).map(Cow::Borrowed);
    }
    let mut out = String::new();
    let mut at = 0;
    while at < inner.len() {
        let run = inner[at..].iter().position(|&c| c == b'\\').unwrap_or(inner.len() - at);
        out.push_str(as_str(&inner[at..at + run])?);
        at += run;
        if at == inner.len() {
            break;
        }
        let (c, len) = match inner[at + 1] {
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => {
                let high = hex4(&inner[at + 2..at + 6]);
                let pair = inner.get(at + 6..at + 12).filter(|p| p.starts_with(b"\\u")).map(|p| hex4(&p[2..]));
                match (high, pair) {
                    (0xd800..=0xdbff, Some(low @ 0xdc00..=0xdfff)) => {
                        (char::from_u32(0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00)).unwrap_or('\0'), 12)
                    }
                    _ => (char::from_u32(high).ok_or_else(|| malformed("a lone surrogate in text"))?, 6),
                }
            }
            other => (other as char, 2),
        };
        out.push(c);
        at += len;
    }
    Ok(Cow::Owned(out))
}

/// A field of an object: its name and its value's text.
type Entry<'a> = (Cow<'a, str>, &'a [u8]);

/// A checked object's fields, in order; a name given twice is malformed.
fn entries(b: &[u8]) -> Result<Vec<Entry<'_>>, SnapshotError> {
    if b.first() != Some(&b'{') {
        return Err(malformed("expected an object"));
    }
    let mut fields: Vec<Entry<'_>> = Vec::new();
    let mut at = skip_space(b, 1);
    while b[at] == b'"' {
        let key_end = scan_string(b, at)?;
        let key = unescape(&b[at..key_end])?;
        let start = skip_space(b, skip_space(b, key_end) + 1);
        let end = scan(b, start, 0)?;
        if fields.iter().any(|(k, _)| *k == key) {
            return Err(malformed(format!("duplicate field `{key}`")));
        }
        if fields.len() == MAX_FIELDS {
            return Err(malformed("an object with too many fields"));
        }
        fields.push((key, &b[start..end]));
        at = skip_space(b, end);
        at = skip_space(b, at + usize::from(b[at] == b','));
    }
    Ok(fields)
}

/// A checked array's items.
fn items<'a>(b: &'a [u8], name: &str) -> Result<Vec<&'a [u8]>, SnapshotError> {
    if b.first() != Some(&b'[') {
        return Err(malformed(format!("`{name}`: expected a list")));
    }
    let mut items = Vec::new();
    let mut at = skip_space(b, 1);
    while b[at] != b']' {
        let end = scan(b, at, 0)?;
        items.push(&b[at..end]);
        at = skip_space(b, end);
        at = skip_space(b, at + usize::from(b[at] == b','));
    }
    Ok(items)
}

fn missing(name: &str) -> SnapshotError {
    malformed(format!("missing field `{name}`"))
}

type Done = Result<(), SnapshotError>;

struct Writer {
    out: TryString,
    /// Whether the record or list being written has no value yet.
    first: bool,
}

impl Writer {
    fn separate(&mut self) {
        if !core::mem::replace(&mut self.first, false) {
            self.out.push(',');
        }
    }

    fn nested(&mut self, open: char, close: char, inner: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        self.separate();
        self.out.push(open);
        let outer = core::mem::replace(&mut self.first, true);
        inner(self)?;
        self.first = outer;
        self.out.push(close);
        Ok(())
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                c if (c as u32) < 0x20 => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.out.push_str("\\u00");
                    self.out.push(HEX[(c as usize) >> 4] as char);
                    self.out.push(HEX[(c as usize) & 15] as char);
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        digits[at..].iter().for_each(|&d| self.out.push(d as char));
    }
}

impl Pass for Writer {
    const COMPACT: bool = false;
    const READS: bool = false;

    fn record(&mut self, fields: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        self.nested('{', '}', fields)
    }

    fn field(&mut self, name: &'static str, value: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        self.separate();
        self.string(name);
        self.out.push(':');
        // The value follows the name: no separator before it.
        self.first = true;
        value(self)?;
        self.first = false;
        Ok(())
    }

    fn uint<T: Uint>(&mut self, v: &mut T) -> Done {
        self.separate();
        self.number(v.get());
        Ok(())
    }

    fn flag(&mut self, v: &mut bool) -> Done {
        self.separate();
        self.out.push_str(if *v { "true" } else { "false" });
        Ok(())
    }

    fn tuple(&mut self, len: usize, item: &mut dyn FnMut(&mut Self, usize) -> Done) -> Done {
        self.nested('[', ']', &mut |w| (0..len).try_for_each(|i| item(w, i)))
    }

    fn list<T: Default>(&mut self, items: &mut Vec<T>, item: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        self.nested('[', ']', &mut |w| items.iter_mut().try_for_each(|v| item(w, v)))
    }

    fn option<T: Default>(&mut self, v: &mut Option<T>, some: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        match v {
            Some(v) => some(self, v),
            None => {
                self.separate();
                self.out.push_str("null");
                Ok(())
            }
        }
    }

    fn variant(
        &mut self,
        v: &mut usize,
        variants: &[(&'static str, bool)],
        data: &mut dyn FnMut(&mut Self, usize) -> Done,
    ) -> Done {
        let (name, holds_data) = variants[*v];
        if !holds_data {
            self.separate();
            self.string(name);
            return Ok(());
        }
        self.nested('{', '}', &mut |w| w.field(name, &mut |w| data(w, *v)))
    }

    fn text(&mut self, v: &mut String) -> Done {
        self.separate();
        self.string(v);
        Ok(())
    }
}

/// Walks checked text.
struct Reader<'a> {
    /// The value being visited; `None`: a field that is not there.
    value: Option<&'a [u8]>,
    /// The field it is (for messages).
    name: &'static str,
    /// The fields of the record being visited, and whether each was visited.
    fields: Vec<(Cow<'a, str>, &'a [u8], bool)>,
}

impl<'a> Reader<'a> {
    /// The value being visited, which must be there.
    fn present(&self) -> Result<&'a [u8], SnapshotError> {
        self.value.ok_or_else(|| missing(self.name))
    }

    fn expected(&self, what: &str) -> SnapshotError {
        malformed(format!("`{}`: expected {what}", self.name))
    }

    /// Visits each of `values` as the value, with `item`.
    fn each(&mut self, values: &[&'a [u8]], item: &mut dyn FnMut(&mut Self, usize) -> Done) -> Done {
        let outer = self.value;
        for (i, v) in values.iter().enumerate() {
            self.value = Some(v);
            item(self, i)?;
        }
        self.value = outer;
        Ok(())
    }
}

impl Pass for Reader<'_> {
    const COMPACT: bool = false;
    const READS: bool = true;

    fn record(&mut self, fields: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        let value = self.present()?;
        if value.first() != Some(&b'{') {
            return Err(self.expected("an object"));
        }
        let inner = entries(value)?.into_iter().map(|(k, v)| (k, v, false)).collect();
        let outer = core::mem::replace(&mut self.fields, inner);
        fields(self)?;
        if let Some((unknown, ..)) = self.fields.iter().find(|(.., visited)| !visited) {
            return Err(malformed(format!("unknown field `{unknown}`")));
        }
        self.fields = outer;
        Ok(())
    }

    fn field(&mut self, name: &'static str, value: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        let found = self.fields.iter_mut().find(|(k, ..)| *k == name).map(|(_, v, visited)| {
            *visited = true;
            *v
        });
        let (outer, outer_name) = (self.value, self.name);
        (self.value, self.name) = (found, name);
        value(self)?;
        (self.value, self.name) = (outer, outer_name);
        Ok(())
    }

    fn uint<T: Uint>(&mut self, v: &mut T) -> Done {
        let value = self.present()?;
        let parsed = value.iter().try_fold(0u64, |n, &d| {
            if !d.is_ascii_digit() {
                return None;
            }
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        });
        *v = parsed.and_then(T::from_u64).ok_or_else(|| self.expected("a whole number in the field's range"))?;
        Ok(())
    }

    fn flag(&mut self, v: &mut bool) -> Done {
        *v = match self.present()? {
            b"true" => true,
            b"false" => false,
            _ => return Err(self.expected("true or false")),
        };
        Ok(())
    }

    fn tuple(&mut self, len: usize, item: &mut dyn FnMut(&mut Self, usize) -> Done) -> Done {
        let values = items(self.present()?, self.name)?;
        if values.len() != len {
            return Err(self.expected(&format!("{len} values")));
        }
        self.each(&values, item)
    }

    fn list<T: Default>(&mut self, items_out: &mut Vec<T>, item: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        let values = items(self.present()?, self.name)?;
        items_out.clear();
        self.each(&values, &mut |r, _| {
            let mut v = T::default();
            item(r, &mut v)?;
            items_out.push(v);
            Ok(())
        })
    }

    fn option<T: Default>(&mut self, v: &mut Option<T>, some: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        *v = None;
        match self.value {
            None | Some(b"null") => Ok(()),
            Some(_) => some(self, v.insert(T::default())),
        }
    }

    fn variant(
        &mut self,
        v: &mut usize,
        variants: &[(&'static str, bool)],
        data: &mut dyn FnMut(&mut Self, usize) -> Done,
    ) -> Done {
        let value = self.present()?;
        let index = |name: &str, holds_data: bool| variants.iter().position(|&(n, d)| n == name && d == holds_data);
        if value.first() == Some(&b'"') {
            *v = index(&unescape(value)?, false).ok_or_else(|| self.expected("a known variant"))?;
            return data(self, *v);
        }
        let fields = if value.first() == Some(&b'{') { entries(value)? } else { Vec::new() };
        let [(name, inner)] = fields.as_slice() else { return Err(self.expected("a known variant")) };
        *v = index(name, true).ok_or_else(|| self.expected("a known variant"))?;
        let outer = self.value;
        self.value = Some(inner);
        data(self, *v)?;
        self.value = outer;
        Ok(())
    }

    fn text(&mut self, v: &mut String) -> Done {
        let value = self.present()?;
        if value.first() != Some(&b'"') {
            return Err(self.expected("text"));
        }
        *v = unescape(value)?.into_owned();
        Ok(())
    }
}
