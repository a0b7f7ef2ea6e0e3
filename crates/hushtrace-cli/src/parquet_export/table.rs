//! One Parquet file being written: rows buffered per column, written out as a row group every
//! [`ROW_GROUP_ROWS`] rows, so memory does not grow with the table. The file is written as
//! `<name>.parquet.partial` and renamed by [`Table::finish`]; [`Table::discard`] removes it.

use super::ExportError;
use parquet::basic::{Compression, Encoding};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per row group: a few MB of buffered columns at most, and groups large enough for
/// readers to skip by their statistics.
pub const ROW_GROUP_ROWS: usize = 1 << 16;

/// A column's type in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `INT64`.
    I64,
    /// `INT32`.
    I32,
    /// `DOUBLE`.
    F64,
    /// `BOOLEAN`.
    Bool,
    /// `BYTE_ARRAY (STRING)`: UTF-8 text.
    Str,
    /// `BYTE_ARRAY (JSON)`: a JSON document.
    Json,
}

/// A column: its name, type and whether it may be null.
#[derive(Clone, Copy, Debug)]
pub struct Col {
    /// Column name.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// Whether the column may hold nulls (`optional`).
    pub nullable: bool,
    /// Dictionary-encoded (few distinct values: names, kinds). Columns of mostly distinct
    /// values (times, ids) are not: integers are delta-encoded instead (times and ids grow
    /// slowly, their deltas are small), which is both smaller and several times faster to
    /// write than a dictionary that overflows.
    pub dict: bool,
}

impl Col {
    /// The same column without a dictionary (see [`Col::dict`]).
    pub const fn distinct(self) -> Col {
        Col {
            dict: false,
            ..self
        }
    }
}

/// A required column.
pub const fn req(name: &'static str, ty: Ty) -> Col {
    Col {
        name,
        ty,
        nullable: false,
        dict: true,
    }
}

/// An optional (nullable) column.
pub const fn opt(name: &'static str, ty: Ty) -> Col {
    Col {
        name,
        ty,
        nullable: true,
        dict: true,
    }
}

/// The Parquet message type of `cols`, named `name`.
fn message_type(name: &str, cols: &[Col]) -> String {
    let mut s = format!("message {name} {{\n");
    for c in cols {
        let (phys, logical) = match c.ty {
            Ty::I64 => ("int64", ""),
            Ty::I32 => ("int32", ""),
            Ty::F64 => ("double", ""),
            Ty::Bool => ("boolean", ""),
            Ty::Str => ("binary", " (STRING)"),
            Ty::Json => ("binary", " (JSON)"),
        };
        let rep = if c.nullable { "optional" } else { "required" };
        s.push_str(&format!("  {rep} {phys} {}{logical};\n", c.name));
    }
    s.push('}');
    s
}

/// The values of one column, buffered.
#[derive(Debug)]
enum Values {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    /// Strings: their bytes one after the other, and each one's end in `data`; made into
    /// `ByteArray`s sharing one buffer when the row group is written (no allocation per value).
    Bytes {
        data: Vec<u8>,
        ends: Vec<usize>,
    },
}

impl Values {
    fn new(ty: Ty) -> Values {
        match ty {
            Ty::I64 => Values::I64(Vec::new()),
            Ty::I32 => Values::I32(Vec::new()),
            Ty::F64 => Values::F64(Vec::new()),
            Ty::Bool => Values::Bool(Vec::new()),
            Ty::Str | Ty::Json => Values::Bytes {
                data: Vec::new(),
                ends: Vec::new(),
            },
        }
    }

    fn clear(&mut self) {
        match self {
            Values::I64(v) => v.clear(),
            Values::I32(v) => v.clear(),
            Values::F64(v) => v.clear(),
            Values::Bool(v) => v.clear(),
            Values::Bytes { data, ends } => {
                data.clear();
                ends.clear();
            }
        }
    }
}

/// One value of a row, as [`Row`] pushes it.
#[derive(Clone, Copy, Debug)]
enum Val<'a> {
    I64(i64),
    I32(i32),
    F64(f64),
    Bool(bool),
    Bytes(&'a [u8]),
}

#[derive(Debug)]
struct Buffer {
    values: Values,
    /// Definition levels (1 = value, 0 = null) of an optional column.
    defs: Option<Vec<i16>>,
}

/// A Parquet file being written.
pub struct Table {
    name: &'static str,
    cols: &'static [Col],
    bufs: Vec<Buffer>,
    rows: usize,
    total: u64,
    writer: Option<SerializedFileWriter<File>>,
    partial: PathBuf,
    path: PathBuf,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("rows", &self.total)
            .field("path", &self.path)
            .finish()
    }
}

impl Table {
    /// Creates `dir/<name>.parquet.partial` (mode 0600, like every output derived from a
    /// trace; a stale one from an interrupted run is replaced) for a table of `cols`.
    pub fn create(
        dir: &Path,
        name: &'static str,
        cols: &'static [Col],
    ) -> Result<Table, ExportError> {
        let path = dir.join(format!("{name}.parquet"));
        let partial = dir.join(format!("{name}.parquet.partial"));
        if std::fs::symlink_metadata(&partial).is_ok_and(|m| m.is_file() || m.is_symlink()) {
            let _ = std::fs::remove_file(&partial);
        }
        let file = crate::create_private(&partial).map_err(|e| ExportError::io(&partial, e))?;
        let schema = parquet::schema::parser::parse_message_type(&message_type(name, cols))?;
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("hushtrace {}", env!("CARGO_PKG_VERSION")));
        for c in cols.iter().filter(|c| !c.dict) {
            let path = ColumnPath::from(c.name);
            props = props.set_column_dictionary_enabled(path.clone(), false);
            if c.ty == Ty::Json {
                // Min and max of JSON text tell a reader nothing.
                props = props.set_column_statistics_enabled(path.clone(), EnabledStatistics::None);
            }
            if matches!(c.ty, Ty::I64 | Ty::I32) {
                props = props.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
            }
        }
        let props = props.build();
        let writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))?;
        let bufs = cols
            .iter()
            .map(|c| Buffer {
                values: Values::new(c.ty),
                defs: c.nullable.then(Vec::new),
            })
            .collect();
        Ok(Table {
            name,
            cols,
            bufs,
            rows: 0,
            total: 0,
            writer: Some(writer),
            partial,
            path,
        })
    }

    /// Starts a row: push every column's value, in schema order, then [`Row::end`].
    pub fn row(&mut self) -> Row<'_> {
        Row { t: self, col: 0 }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.total
    }

    /// The final path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[inline]
    fn push(&mut self, col: usize, v: Option<Val<'_>>) {
        let Some(buf) = self.bufs.get_mut(col) else {
            debug_assert!(false, "{}: too many values in a row", self.name);
            return;
        };
        if let Some(defs) = &mut buf.defs {
            defs.push(i16::from(v.is_some()));
        }
        // A null in a required column (a bug of ours) is written as the type's zero.
        let v = match v {
            Some(v) => v,
            None if buf.defs.is_some() => return,
            None => match buf.values {
                Values::I64(_) => Val::I64(0),
                Values::I32(_) => Val::I32(0),
                Values::F64(_) => Val::F64(0.0),
                Values::Bool(_) => Val::Bool(false),
                Values::Bytes { .. } => Val::Bytes(b""),
            },
        };
        match (&mut buf.values, v) {
            (Values::I64(x), Val::I64(v)) => x.push(v),
            (Values::I32(x), Val::I32(v)) => x.push(v),
            (Values::F64(x), Val::F64(v)) => x.push(v),
            (Values::Bool(x), Val::Bool(v)) => x.push(v),
            (Values::Bytes { data, ends }, Val::Bytes(v)) => {
                data.extend_from_slice(v);
                ends.push(data.len());
            }
            _ => debug_assert!(false, "{}.{}: wrong type", self.name, self.cols[col].name),
        }
    }

    fn end_row(&mut self, cols: usize) -> Result<(), ExportError> {
        debug_assert_eq!(cols, self.cols.len(), "{}: short row", self.name);
        self.rows += 1;
        self.total += 1;
        if self.rows >= ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered rows as a row group.
    fn flush(&mut self) -> Result<(), ExportError> {
        if self.rows == 0 {
            return Ok(());
        }
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| ExportError::Parquet(format!("{}: already finished", self.name)))?;
        let mut rg = writer.next_row_group()?;
        for (buf, col) in self.bufs.iter_mut().zip(self.cols) {
            let mut cw = rg.next_column()?.ok_or_else(|| {
                ExportError::Parquet(format!("{}: no column writer for {}", self.name, col.name))
            })?;
            let defs = buf.defs.as_deref();
            match (cw.untyped(), &mut buf.values) {
                (ColumnWriter::Int64ColumnWriter(w), Values::I64(v)) => {
                    w.write_batch(v, defs, None)
                }
                (ColumnWriter::Int32ColumnWriter(w), Values::I32(v)) => {
                    w.write_batch(v, defs, None)
                }
                (ColumnWriter::DoubleColumnWriter(w), Values::F64(v)) => {
                    w.write_batch(v, defs, None)
                }
                (ColumnWriter::BoolColumnWriter(w), Values::Bool(v)) => {
                    w.write_batch(v, defs, None)
                }
                (ColumnWriter::ByteArrayColumnWriter(w), Values::Bytes { data, ends }) => {
                    // The next row group's strings get a buffer of this one's size at once.
                    let next = Vec::with_capacity(data.len());
                    let all = bytes::Bytes::from(std::mem::replace(data, next));
                    let mut start = 0;
                    let v: Vec<ByteArray> = ends
                        .iter()
                        .map(|&end| {
                            let b = ByteArray::from(all.slice(start..end));
                            start = end;
                            b
                        })
                        .collect();
                    w.write_batch(&v, defs, None)
                }
                _ => {
                    return Err(ExportError::Parquet(format!(
                        "{}.{}: column type mismatch",
                        self.name, col.name
                    )))
                }
            }?;
            cw.close()?;
            buf.values.clear();
            if let Some(d) = &mut buf.defs {
                d.clear();
            }
        }
        rg.close()?;
        self.rows = 0;
        Ok(())
    }

    /// Writes the last row group and the footer, syncs the file and renames it to its final
    /// name (replacing an earlier export's).
    pub fn finish(mut self) -> Result<u64, ExportError> {
        self.flush()?;
        let writer = self
            .writer
            .take()
            .ok_or_else(|| ExportError::Parquet(format!("{}: already finished", self.name)))?;
        let file = writer.into_inner()?;
        file.sync_all()
            .map_err(|e| ExportError::io(&self.partial, e))?;
        std::fs::rename(&self.partial, &self.path).map_err(|e| ExportError::io(&self.path, e))?;
        Ok(self.total)
    }

    /// Removes the partial file (after a failure elsewhere).
    pub fn discard(mut self) {
        self.writer = None;
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// One row being pushed: values in schema order.
#[derive(Debug)]
pub struct Row<'t> {
    t: &'t mut Table,
    col: usize,
}

impl Row<'_> {
    #[inline]
    fn put(mut self, v: Option<Val<'_>>) -> Self {
        self.t.push(self.col, v);
        self.col += 1;
        self
    }

    /// An `INT64` value.
    pub fn i64(self, v: i64) -> Self {
        self.put(Some(Val::I64(v)))
    }

    /// An `INT64` value or null.
    pub fn opt_i64(self, v: Option<i64>) -> Self {
        self.put(v.map(Val::I64))
    }

    /// An `INT32` value.
    pub fn i32(self, v: i32) -> Self {
        self.put(Some(Val::I32(v)))
    }

    /// An `INT32` value or null.
    pub fn opt_i32(self, v: Option<i32>) -> Self {
        self.put(v.map(Val::I32))
    }

    /// A `DOUBLE` value or null.
    pub fn opt_f64(self, v: Option<f64>) -> Self {
        self.put(v.map(Val::F64))
    }

    /// A `BOOLEAN` value.
    pub fn bool(self, v: bool) -> Self {
        self.put(Some(Val::Bool(v)))
    }

    /// A string (or JSON) value.
    pub fn str(self, v: &str) -> Self {
        self.put(Some(Val::Bytes(v.as_bytes())))
    }

    /// A string (or JSON) value or null.
    pub fn opt_str(self, v: Option<&str>) -> Self {
        self.put(v.map(|s| Val::Bytes(s.as_bytes())))
    }

    /// Ends the row (a row group is written every [`ROW_GROUP_ROWS`] rows).
    pub fn end(self) -> Result<(), ExportError> {
        let cols = self.col;
        self.t.end_row(cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    const COLS: &[Col] = &[
        req("n", Ty::I64),
        opt("half", Ty::I32),
        opt("x", Ty::F64),
        req("even", Ty::Bool),
        opt("s", Ty::Str),
    ];

    #[test]
    fn rows_go_out_in_row_groups_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Table::create(dir.path(), "t", COLS).unwrap();
        let n = ROW_GROUP_ROWS * 2 + 5;
        for i in 0..n as i64 {
            let odd = i % 2 == 1;
            t.row()
                .i64(i)
                .opt_i32((!odd).then_some((i / 2) as i32))
                .opt_f64(odd.then_some(i as f64 * 0.5))
                .bool(!odd)
                .opt_str((i % 3 == 0).then_some("é\"x"))
                .end()
                .unwrap();
        }
        assert!(dir.path().join("t.parquet.partial").exists());
        let path = t.path().to_owned();
        assert_eq!(t.finish().unwrap(), n as u64);
        assert!(!dir.path().join("t.parquet.partial").exists());
        let r = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(r.metadata().num_row_groups(), 3);
        assert_eq!(r.metadata().file_metadata().num_rows(), n as i64);
        for (i, row) in r.get_row_iter(None).unwrap().enumerate().step_by(997) {
            let row = row.unwrap();
            let f: Vec<&Field> = row.get_column_iter().map(|(_, f)| f).collect();
            let i = i as i64;
            assert_eq!(f[0], &Field::Long(i));
            if i % 2 == 1 {
                assert_eq!(f[1], &Field::Null);
                assert_eq!(f[2], &Field::Double(i as f64 * 0.5));
            } else {
                assert_eq!(f[1], &Field::Int((i / 2) as i32));
                assert_eq!(f[2], &Field::Null);
            }
            assert_eq!(f[3], &Field::Bool(i % 2 == 0));
            match (i % 3 == 0, f[4]) {
                (true, Field::Str(s)) => assert_eq!(s, "é\"x"),
                (false, Field::Null) => {}
                (_, other) => panic!("row {i}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_discarded_table_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Table::create(dir.path(), "t", COLS).unwrap();
        t.row()
            .i64(1)
            .opt_i32(None)
            .opt_f64(None)
            .bool(true)
            .opt_str(None)
            .end()
            .unwrap();
        t.discard();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
