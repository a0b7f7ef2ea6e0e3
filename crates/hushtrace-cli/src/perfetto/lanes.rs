//! Async slices on lanes: a free lane per span, ends that close the slices under them, and
//! those slices continued on another lane.

use super::*;

impl<W: Write> Writer<W> {
    /// The first lane of `pool` with nothing open, created if there is none; taken (the
    /// caller pushes a span on it).
    pub(super) fn free_lane(&mut self, pool: (u32, u64)) -> io::Result<usize> {
        let p = self.layout.pools.entry(pool).or_default();
        if let Some(pos) = p.free.pop_first() {
            return Ok(p.lanes[pos]);
        }
        let n = p.lanes.len();
        let process = self.process_uuid(pool.0, "")?;
        let uuid = self.uuid();
        let base = self.names.name(pool.1);
        let name = if n == 0 {
            base.to_string()
        } else {
            format!("{base} {}", n + 1)
        };
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(process),
            name: Some(name),
            ..Default::default()
        })?;
        let lane = self.layout.lanes.len();
        self.layout.lanes.push(Lane {
            uuid,
            pool,
            pos: n,
            stack: Vec::new(),
        });
        if let Some(p) = self.layout.pools.get_mut(&pool) {
            p.lanes.push(lane);
        }
        Ok(lane)
    }

    /// Marks `lane` free if nothing is open on it.
    pub(super) fn release_if_empty(&mut self, lane: usize) {
        let l = &self.layout.lanes[lane];
        if l.stack.is_empty() {
            if let Some(p) = self.layout.pools.get_mut(&l.pool) {
                p.free.insert(l.pos);
            }
        }
    }

    /// Places the async span `id` of `pid`, whose begin names `parent`, on a lane; returns the
    /// lane's track uuid.
    pub(super) fn async_begin(
        &mut self,
        pid: u32,
        id: u64,
        parent: u64,
        info: &Rc<ClassInfo>,
    ) -> io::Result<u64> {
        let parent_lane = match self.layout.open.get(&(pid, parent)) {
            Some(o) if parent != 0 && parent != id => Some(o.lane),
            _ => None,
        };
        let lane = match parent_lane {
            Some(l) if self.layout.lanes[l].stack.last() == Some(&parent) => l,
            Some(l) => self.free_lane(self.layout.lanes[l].pool)?,
            None => self.free_lane((pid, info.name_iid))?,
        };
        self.open_on(lane, pid, id, info);
        Ok(self.layout.lanes[lane].uuid)
    }

    pub(super) fn open_on(&mut self, lane: usize, pid: u32, id: u64, info: &Rc<ClassInfo>) {
        self.layout.lanes[lane].stack.push(id);
        self.layout.open.insert(
            (pid, id),
            OpenAsync {
                lane,
                info: Rc::clone(info),
            },
        );
    }

    /// Takes the async span `id` of `pid` (named `name_iid`) off its lane; returns the lane's
    /// uuid and the spans that were open above it on the lane, outermost first (already ended
    /// there, on sequence `s` at `t_ns`), or `None` when the span is not open (its begin is
    /// not in the trace).
    pub(super) fn async_end(
        &mut self,
        s: usize,
        pid: u32,
        id: u64,
        name_iid: u64,
        t_ns: i128,
    ) -> io::Result<Option<(u64, Vec<u64>)>> {
        let lane = match self.layout.open.get(&(pid, id)) {
            Some(o) if o.info.name_iid == name_iid => o.lane,
            _ => return Ok(None),
        };
        self.layout.open.remove(&(pid, id));
        let l = &mut self.layout.lanes[lane];
        let uuid = l.uuid;
        let pos = l.stack.iter().rposition(|&x| x == id).unwrap_or(0);
        let above: Vec<u64> = l.stack.drain(pos + 1..).collect();
        l.stack.truncate(pos);
        for _ in &above {
            let mut te = Vec::new();
            prost::encoding::int32::encode(track_event_tag::TYPE, &TYPE_SLICE_END, &mut te);
            prost::encoding::uint64::encode(track_event_tag::TRACK_UUID, &uuid, &mut te);
            self.emit(s, t_ns, te, None)?;
        }
        self.release_if_empty(lane);
        Ok(Some((uuid, above)))
    }

    /// Begins again, on a free lane of their pool, the spans `ids` (outermost first) of `pid`
    /// that were ended early because a span under them on their lane ended.
    pub(super) fn continue_moved(
        &mut self,
        s: usize,
        pid: u32,
        ids: &[u64],
        t_ns: i128,
    ) -> io::Result<()> {
        use prost::encoding::{int32, uint64};
        use track_event_tag as tag;
        let Some(first) = ids.first().and_then(|id| self.layout.open.get(&(pid, *id))) else {
            return Ok(());
        };
        let pool = self.layout.lanes[first.lane].pool;
        let lane = self.free_lane(pool)?;
        for &id in ids {
            let Some(o) = self.layout.open.get(&(pid, id)) else {
                continue;
            };
            let info = Rc::clone(&o.info);
            self.open_on(lane, pid, id, &info);
            let mut te = Vec::new();
            int32::encode(tag::TYPE, &TYPE_SLICE_BEGIN, &mut te);
            uint64::encode(tag::TRACK_UUID, &self.layout.lanes[lane].uuid, &mut te);
            uint64::encode(tag::NAME_IID, &info.name_iid, &mut te);
            uint64::encode(tag::CATEGORY_IIDS, &info.cat_iid, &mut te);
            self.value_refs.clear();
            let interned = self.intern(s, &info, true);
            self.emit(s, t_ns, te, interned)?;
        }
        Ok(())
    }
}
