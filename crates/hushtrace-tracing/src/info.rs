//! What each `tracing` callsite becomes: its role (event, span begin, record, end), its hushtrace
//! callsite names and prefix fields, found at record time.

use super::*;

pub(crate) fn level_str(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        _ => "ERROR",
    }
}

/// What the layer knows about one `tracing` callsite (leaked: callsites live forever).
#[derive(Debug)]
pub(crate) struct Info {
    /// The callsite's field names, as hushtrace field names (see the crate docs).
    pub(crate) fields: Vec<String>,
    pub(crate) role: Role,
}

#[derive(Debug)]
pub(crate) enum Role {
    Event {
        schema: Schema,
    },
    Span {
        begin: Schema,
        record: Schema,
        end: Registered,
    },
    /// A callsite hushtrace could not register (the registry is full): recorded never.
    Unregistered,
}

impl Info {
    pub(crate) fn new(meta: &'static Metadata<'static>) -> Info {
        let category = clean_name(meta.target());
        let name = clean_name(meta.name());
        let role = if meta.is_span() {
            let fields = field_names(meta, &["id", "parent", "span_id"]);
            let begin = Schema::new(&category, &name, Kind::AsyncBegin, BEGIN_PREFIX, &fields);
            let record = Schema::new(&category, &name, Kind::Instant, RECORD_PREFIX, &fields);
            let end = hushtrace::register_callsite(
                &category,
                &name,
                Kind::AsyncEnd,
                &[("id", FieldType::U64)],
            );
            match (begin, record, end) {
                (Some(begin), Some(record), Ok(end)) => {
                    return Info {
                        fields,
                        role: Role::Span { begin, record, end },
                    }
                }
                _ => Role::Unregistered,
            }
        } else {
            let fields = field_names(meta, &["level"]);
            match Schema::new(&category, &name, Kind::Instant, EVENT_PREFIX, &fields) {
                Some(schema) => {
                    return Info {
                        fields,
                        role: Role::Event { schema },
                    }
                }
                None => Role::Unregistered,
            }
        };
        Info {
            fields: Vec::new(),
            role,
        }
    }
}

/// The fields the bridge puts before a callsite's own: an event's level; a span begin's id and
/// parent; a `Span::record`'s span id.
const EVENT_PREFIX: &[(&str, FieldType)] = &[("level", FieldType::Str)];

const BEGIN_PREFIX: &[(&str, FieldType)] = &[("id", FieldType::U64), ("parent", FieldType::U64)];

const RECORD_PREFIX: &[(&str, FieldType)] = &[("span_id", FieldType::U64)];

/// A name the trace metadata can hold: NUL, quotes, backslashes and newlines become `_`.
fn clean_name(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if matches!(c, '\0' | '"' | '\\' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect();
    if s.is_empty() {
        "_".to_string()
    } else {
        s
    }
}

/// The callsite's field names as identifiers, distinct from each other and from `reserved`.
fn field_names(meta: &Metadata<'_>, reserved: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in meta.fields() {
        let mut n: String = f
            .name()
            .trim_start_matches("r#")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) {
            n.insert(0, '_');
        }
        while reserved.contains(&n.as_str()) || out.contains(&n) {
            n.push('_');
        }
        out.push(n);
    }
    out
}
