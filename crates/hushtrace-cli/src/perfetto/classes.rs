//! What each event class becomes: its interned names and kind, Python functions by their full
//! name.

use super::*;

impl<W: Write> Writer<W> {
    pub(super) fn class(&mut self, ev: &MergedEvent<'_>) -> Rc<ClassInfo> {
        if self.classes.len() <= ev.trace {
            self.classes.resize(ev.trace + 1, Vec::new());
        }
        let id = ev.event.class.id as usize;
        if self.classes[ev.trace].len() <= id {
            self.classes[ev.trace].resize(id + 1, None);
        }
        if let Some(c) = &self.classes[ev.trace][id] {
            return Rc::clone(c);
        }
        let info = self.new_class(ev, None);
        self.classes[ev.trace][id] = Some(Rc::clone(&info));
        info
    }

    /// The class of a traced Python function's event, named `full` (`"module:qualname"`).
    pub(super) fn py_class(&mut self, ev: &MergedEvent<'_>, f: u32, full: &str) -> Rc<ClassInfo> {
        let key = (ev.trace, ev.event.class.id, f);
        if let Some(c) = self.py_classes.get(&key) {
            return Rc::clone(c);
        }
        let info = self.new_class(ev, Some(full));
        self.py_classes.insert(key, Rc::clone(&info));
        info
    }

    pub(super) fn new_class(
        &mut self,
        ev: &MergedEvent<'_>,
        full_name: Option<&str>,
    ) -> Rc<ClassInfo> {
        let class = ev.event.class;
        let (cat, name) = split_name(full_name.unwrap_or(&class.name));
        let index = self.class_count;
        self.class_count += 1;
        let mut info = ClassInfo {
            index,
            head: Vec::new(),
            kind: class.kind,
            name_iid: if class.kind == Kind::Counter {
                self.counter_names.iid(&class.name)
            } else {
                self.names.iid(name)
            },
            cat_iid: self.cats.iid(cat),
            field_iids: class
                .fields
                .iter()
                .flatten()
                .map(|(k, _)| self.fields.iid(k))
                .collect(),
        };
        {
            use prost::encoding::{int32, uint64};
            use track_event_tag as tag;
            let h = &mut info.head;
            match info.kind {
                Kind::SpanBegin => int32::encode(tag::TYPE, &TYPE_SLICE_BEGIN, h),
                Kind::SpanEnd => int32::encode(tag::TYPE, &TYPE_SLICE_END, h),
                Kind::Instant => int32::encode(tag::TYPE, &TYPE_INSTANT, h),
                _ => {}
            }
            if matches!(info.kind, Kind::SpanBegin | Kind::Instant) {
                uint64::encode(tag::NAME_IID, &info.name_iid, h);
                uint64::encode(tag::CATEGORY_IIDS, &info.cat_iid, h);
            }
        }
        Rc::new(info)
    }
}
