//! The compact encoding: postcard's wire format, written and read by hand
//! (see the module above for the rules).

use alloc::string::String;
use alloc::vec::Vec;

use super::{Pass, Saved, Uint, malformed, visit_version};
use crate::error::SnapshotError;
use crate::fallible::{OutOfMemory, TryBytes};

/// `value` as compact bytes, or [`OutOfMemory`] (nothing else can fail).
pub(super) fn write<T: Saved>(value: &mut T) -> Result<Vec<u8>, OutOfMemory> {
    let mut w = Writer(TryBytes::default());
    let _ = value.visit(&mut w);
    w.0.finish()
}

/// The value compact `bytes` hold, all of them.
pub(super) fn read<T: Saved>(bytes: &[u8]) -> Result<T, SnapshotError> {
    let mut r = Reader(bytes);
    let mut value = T::default();
    value.visit(&mut r)?;
    if !r.0.is_empty() {
        return Err(malformed("bytes after the snapshot"));
    }
    Ok(value)
}

/// The length of the list after the version (checked first, so that a
/// newer snapshot is reported as such) and `skip` more unsigned integers.
pub(super) fn count(bytes: &[u8], skip: usize) -> Result<usize, SnapshotError> {
    let mut r = Reader(bytes);
    visit_version(&mut r, &mut 0)?;
    for _ in 0..skip {
        r.varint(10)?;
    }
    r.len()
}

struct Writer(TryBytes);

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
}

type Done = Result<(), SnapshotError>;

impl Pass for Writer {
    const COMPACT: bool = true;
    const READS: bool = false;

    fn record(&mut self, fields: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        fields(self)
    }

    fn field(&mut self, _: &'static str, value: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        value(self)
    }

    fn uint<T: Uint>(&mut self, v: &mut T) -> Done {
        match T::VARINT_BYTES {
            0 => self.0.push(v.get() as u8),
            _ => self.varint(v.get()),
        }
        Ok(())
    }

    fn flag(&mut self, v: &mut bool) -> Done {
        self.0.push(u8::from(*v));
        Ok(())
    }

    fn tuple(&mut self, len: usize, item: &mut dyn FnMut(&mut Self, usize) -> Done) -> Done {
        (0..len).try_for_each(|i| item(self, i))
    }

    fn list<T: Default>(&mut self, items: &mut Vec<T>, item: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        self.varint(items.len() as u64);
        items.iter_mut().try_for_each(|v| item(self, v))
    }

    fn option<T: Default>(&mut self, v: &mut Option<T>, some: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        self.0.push(u8::from(v.is_some()));
        v.as_mut().map_or(Ok(()), |v| some(self, v))
    }

    fn variant(
        &mut self,
        v: &mut usize,
        variants: &[(&'static str, bool)],
        data: &mut dyn FnMut(&mut Self, usize) -> Done,
    ) -> Done {
        self.varint(*v as u64);
        if variants[*v].1 { data(self, *v) } else { Ok(()) }
    }

    fn text(&mut self, v: &mut String) -> Done {
        self.varint(v.len() as u64);
        self.0.extend_from_slice(v.as_bytes());
        Ok(())
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, SnapshotError> {
        let (&b, rest) = self.0.split_first().ok_or_else(|| malformed("the bytes end too early"))?;
        self.0 = rest;
        Ok(b)
    }

    /// A varint of at most `max_bytes` bytes.
    fn varint(&mut self, max_bytes: usize) -> Result<u64, SnapshotError> {
        let mut v = 0u64;
        for i in 0..max_bytes {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && bits > 1 {
                break;
            }
            v |= bits << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(malformed("a number is out of range"))
    }

    fn len(&mut self) -> Result<usize, SnapshotError> {
        usize::try_from(self.varint(10)?).map_err(|_| malformed("a length is out of range"))
    }

    fn tag(&mut self) -> Result<bool, SnapshotError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed("a flag is neither 0 nor 1")),
        }
    }
}

impl Pass for Reader<'_> {
    const COMPACT: bool = true;
    const READS: bool = true;

    fn record(&mut self, fields: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        fields(self)
    }

    fn field(&mut self, _: &'static str, value: &mut dyn FnMut(&mut Self) -> Done) -> Done {
        value(self)
    }

    fn uint<T: Uint>(&mut self, v: &mut T) -> Done {
        let raw = match T::VARINT_BYTES {
            0 => u64::from(self.byte()?),
            n => self.varint(n)?,
        };
        *v = T::from_u64(raw).ok_or_else(|| malformed("a number is out of range"))?;
        Ok(())
    }

    fn flag(&mut self, v: &mut bool) -> Done {
        *v = self.tag()?;
        Ok(())
    }

    fn tuple(&mut self, len: usize, item: &mut dyn FnMut(&mut Self, usize) -> Done) -> Done {
        (0..len).try_for_each(|i| item(self, i))
    }

    fn list<T: Default>(&mut self, items: &mut Vec<T>, item: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        let len = self.len()?;
        items.clear();
        // Grown as items are read: a forged length costs nothing up front.
        for _ in 0..len {
            let mut v = T::default();
            item(self, &mut v)?;
            items.push(v);
        }
        Ok(())
    }

    fn option<T: Default>(&mut self, v: &mut Option<T>, some: &mut dyn FnMut(&mut Self, &mut T) -> Done) -> Done {
        *v = None;
        if self.tag()? {
            some(self, v.insert(T::default()))?;
        }
        Ok(())
    }

    fn variant(
        &mut self,
        v: &mut usize,
        variants: &[(&'static str, bool)],
        data: &mut dyn FnMut(&mut Self, usize) -> Done,
    ) -> Done {
        let index = self.varint(5)?;
        let index = usize::try_from(index).ok().filter(|&i| i < variants.len());
        *v = index.ok_or_else(|| malformed("an unknown variant"))?;
        data(self, *v)
    }

    fn text(&mut self, v: &mut String) -> Done {
        let len = self.len()?;
        if len > self.0.len() {
            return Err(malformed("the bytes end too early"));
        }
        let (text, rest) = self.0.split_at(len);
        *v = String::from(core::str::from_utf8(text).map_err(|_| malformed("text is not UTF-8"))?);
        self.0 = rest;
        Ok(())
    }
}
