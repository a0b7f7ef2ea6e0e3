//! The track descriptors: processes, threads and counters, each written just before the first
//! event that needs it.

use super::*;

impl<W: Write> Writer<W> {
    pub(super) fn descriptor(&mut self, d: TrackDescriptor) -> io::Result<()> {
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(DESCRIPTOR_SEQUENCE),
            track_descriptor: Some(d),
            ..Default::default()
        })
    }

    /// The descriptor of thread track `uuid` (again when the thread was renamed: readers take
    /// the last name).
    pub(super) fn thread_descriptor(
        &mut self,
        uuid: u64,
        parent: u64,
        pid: u32,
        tid: u32,
        name: &str,
    ) -> io::Result<()> {
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            thread: Some(ThreadDescriptor {
                pid: Some(pid as i32),
                tid: Some(tid as i32),
                thread_name: Some(name.to_string()),
            }),
            ..Default::default()
        })
    }

    pub(super) fn process_uuid(&mut self, pid: u32, name: &str) -> io::Result<u64> {
        if let Some(&u) = self.processes.get(&pid) {
            return Ok(u);
        }
        let uuid = self.uuid();
        self.processes.insert(pid, uuid);
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            process: Some(ProcessDescriptor {
                pid: Some(pid as i32),
                process_name: (!name.is_empty()).then(|| name.to_string()),
            }),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    pub(super) fn counter_track(&mut self, pid: u32, name_iid: u64) -> io::Result<u64> {
        if let Some(&u) = self.counters.get(&(pid, name_iid)) {
            return Ok(u);
        }
        let parent = self.process_uuid(pid, "")?;
        let uuid = self.uuid();
        self.counters.insert((pid, name_iid), uuid);
        let name = self.counter_names.name(name_iid).to_string();
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            counter: Some(CounterDescriptor {}),
            ..Default::default()
        })?;
        Ok(uuid)
    }
}
