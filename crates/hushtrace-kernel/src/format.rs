//! Event layouts from tracefs: `events/<sys>/<name>/format` and `events/header_page`.
//!
//! Nothing is hard-coded: the id, every field's offset, size and signedness come from the
//! kernel's own description, so a kernel whose layouts differ is read correctly.

use std::fmt;

/// How a field's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Inline bytes (an integer or a fixed `char[N]`).
    Inline,
    /// `__data_loc`: a `u32` holding offset (low 16 bits, from the record's start) and length.
    DataLoc,
    /// `__rel_loc`: like `DataLoc` with the offset counted from the end of the `u32` itself.
    RelLoc,
}

/// One field of an event record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name (`prev_pid`).
    pub name: String,
    /// Declared C type (`pid_t`, `char[16]`, `__data_loc char[]`).
    pub ctype: String,
    /// Byte offset in the record (the record starts with `common_type`).
    pub offset: usize,
    /// Size in bytes (for `__data_loc` fields, of the `u32` locator).
    pub size: usize,
    /// Whether the integer is signed.
    pub signed: bool,
    /// How the bytes are stored.
    pub storage: Storage,
}

impl Field {
    /// Whether this field holds text (`char` array or dynamic `char[]`).
    pub fn is_text(&self) -> bool {
        self.ctype.contains("char") && self.ctype.contains('[')
    }

    /// The integer value of the field in `rec`, widened to `i64` (sign-extended when signed);
    /// `None` if the record is too short or the size is not 1, 2, 4 or 8.
    pub fn int(&self, rec: &[u8]) -> Option<i64> {
        let b = rec.get(self.offset..self.offset.checked_add(self.size)?)?;
        Some(match (self.size, self.signed) {
            (1, true) => b[0] as i8 as i64,
            (1, false) => b[0] as i64,
            (2, true) => i16::from_le_bytes([b[0], b[1]]) as i64,
            (2, false) => u16::from_le_bytes([b[0], b[1]]) as i64,
            (4, true) => i32::from_le_bytes(b.try_into().ok()?) as i64,
            (4, false) => u32::from_le_bytes(b.try_into().ok()?) as i64,
            (8, _) => i64::from_le_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// The text of the field in `rec`, up to its first NUL; `None` if it points outside.
    pub fn text<'a>(&self, rec: &'a [u8]) -> Option<&'a [u8]> {
        let bytes = match self.storage {
            Storage::Inline => rec.get(self.offset..self.offset.checked_add(self.size)?)?,
            Storage::DataLoc | Storage::RelLoc => {
                let at = self.offset..self.offset.checked_add(4)?;
                let loc = u32::from_le_bytes(rec.get(at)?.try_into().ok()?);
                let mut off = (loc & 0xffff) as usize;
                if self.storage == Storage::RelLoc {
                    off = off.checked_add(self.offset)?.checked_add(4)?;
                }
                let len = (loc >> 16) as usize;
                rec.get(off..off.checked_add(len)?)?
            }
        };
        let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
        Some(&bytes[..end])
    }
}

/// An event's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    /// Event name (`sched_switch`).
    pub name: String,
    /// Its id: the value of `common_type` in its records.
    pub id: u16,
    /// Its fields, common ones included.
    pub fields: Vec<Field>,
}

/// A format file that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError(pub String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

impl EventFormat {
    /// Parses the text of an `events/<sys>/<name>/format` file.
    ///
    /// ```
    /// let text = "name: sched_waking\nID: 317\nformat:\n\
    /// \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    /// \tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
    /// \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\nprint fmt: \"...\"\n";
    /// let f = hushtrace_kernel::format::EventFormat::parse(text).unwrap();
    /// assert_eq!((f.name.as_str(), f.id), ("sched_waking", 317));
    /// assert_eq!(f.field("pid").unwrap().offset, 24);
    /// assert!(f.field("comm").unwrap().is_text());
    /// ```
    pub fn parse(text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("ID:") {
                id = Some(v.trim().parse::<u16>().map_err(|_| {
                    FormatError(format!("line {}: bad event id {:?}", n + 1, v.trim()))
                })?);
            } else if line.starts_with("field:") {
                fields.push(
                    parse_field(line).ok_or_else(|| {
                        FormatError(format!("line {}: bad field {line:?}", n + 1))
                    })?,
                );
            }
        }
        Ok(EventFormat {
            name: name.ok_or_else(|| FormatError("no `name:` line".into()))?,
            id: id.ok_or_else(|| FormatError("no `ID:` line".into()))?,
            fields,
        })
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parses `field:<decl>;\toffset:N;\tsize:N;\tsigned:N;`.
fn parse_field(line: &str) -> Option<Field> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once(':')?;
        match k.trim() {
            "field" => decl = Some(v.trim()),
            "offset" => offset = v.trim().parse().ok(),
            "size" => size = v.trim().parse().ok(),
            "signed" => signed = v.trim() == "1",
            _ => {}
        }
    }
    let decl = decl?;
    // The name is the last identifier, before a trailing `[N]` (`char comm[16]`); in
    // `__data_loc char[] name` the brackets belong to the type.
    let (head, dims) = match (decl.ends_with(']'), decl.rfind('[')) {
        (true, Some(i)) => (&decl[..i], &decl[i..]),
        _ => (decl, ""),
    };
    let head = head.trim_end();
    let split = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let name = head[split + 1..].to_string();
    if name.is_empty() {
        return None;
    }
    let ctype = format!("{}{dims}", head[..split + 1].trim());
    let storage = if ctype.starts_with("__data_loc") {
        Storage::DataLoc
    } else if ctype.starts_with("__rel_loc") {
        Storage::RelLoc
    } else {
        Storage::Inline
    };
    Some(Field {
        name,
        ctype,
        offset: offset?,
        size: size?,
        signed,
        storage,
    })
}

/// The ring-buffer page header layout (`events/header_page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    /// Offset and size of the page's base timestamp.
    pub timestamp: (usize, usize),
    /// Offset and size of the `commit` word (bytes of data, with the missed-events flags).
    pub commit: (usize, usize),
    /// Offset of the first event.
    pub data: usize,
}

impl PageHeader {
    /// Parses `events/header_page`.
    ///
    /// ```
    /// let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
    /// \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
    /// \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
    /// \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
    /// let h = hushtrace_kernel::format::PageHeader::parse(text).unwrap();
    /// assert_eq!((h.timestamp, h.commit, h.data), ((0, 8), (8, 8), 16));
    /// ```
    pub fn parse(text: &str) -> Result<PageHeader, FormatError> {
        let mut ts = None;
        let mut commit = None;
        let mut data = None;
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("field:"))
        {
            let f = parse_field(line)
                .ok_or_else(|| FormatError(format!("header_page: bad field {line:?}")))?;
            match f.name.as_str() {
                "timestamp" => ts = Some((f.offset, f.size)),
                "commit" => commit = Some((f.offset, f.size)),
                "data" => data = Some(f.offset),
                _ => {}
            }
        }
        let h = PageHeader {
            timestamp: ts.ok_or_else(|| FormatError("header_page: no timestamp field".into()))?,
            commit: commit.ok_or_else(|| FormatError("header_page: no commit field".into()))?,
            data: data.ok_or_else(|| FormatError("header_page: no data field".into()))?,
        };
        if h.timestamp.1 != 8 || !matches!(h.commit.1, 4 | 8) {
            return Err(FormatError(format!(
                "header_page: unsupported layout {h:?}"
            )));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_loc_and_arrays() {
        let text = "name: irq_handler_entry\nID: 5\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\
            \tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n";
        let f = EventFormat::parse(text).unwrap();
        let name = f.field("name").unwrap();
        assert_eq!(name.storage, Storage::DataLoc);
        assert!(name.is_text());
        assert_eq!(name.ctype, "__data_loc char[]");
        let mut rec = vec![0u8; 16];
        rec[8..12].copy_from_slice(&(-3i32).to_le_bytes());
        rec[12..16].copy_from_slice(&(16u32 | (5 << 16)).to_le_bytes());
        rec.extend_from_slice(b"eth0\0");
        assert_eq!(f.field("irq").unwrap().int(&rec), Some(-3));
        assert_eq!(name.text(&rec), Some(&b"eth0"[..]));
        // A locator pointing outside the record.
        rec[12..16].copy_from_slice(&(16u32 | (50 << 16)).to_le_bytes());
        assert_eq!(name.text(&rec), None);
    }

    #[test]
    fn bad_formats_are_errors() {
        assert!(EventFormat::parse("name: x\n").is_err());
        assert!(EventFormat::parse("name: x\nID: zz\n").is_err());
        assert!(EventFormat::parse("name: x\nID: 1\n\tfield:int;\toffset:0;\tsize:4;\n").is_err());
        assert!(PageHeader::parse("").is_err());
    }
}
