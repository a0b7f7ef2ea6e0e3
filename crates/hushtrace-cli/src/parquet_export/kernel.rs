//! The kernel trace (`record --kernel`, DIR/kernel) as two tables: `sched`, every scheduling
//! event of every CPU as it comes (streaming), and `thread_state`, the traced threads' time
//! running, runnable and blocked, from the kernel analysis `report` uses
//! ([`hushtrace_kernel::analysis::Timeline`]), so that a span's "why late" is a join.

use super::events::ThreadAcc;
use super::table::Table;
use super::ExportError;
use hushtrace_ctf::reader::Session;
use hushtrace_kernel::analysis::{Actor, Timeline};
use hushtrace_kernel::event::{Event, Wake};
use hushtrace_kernel::recovery::{self, Part};
use hushtrace_kernel::KernelTrace;
use std::collections::BTreeMap;

/// The session's kernel trace, if it has one that reads; `Err`: why one that is there does not.
pub fn open(session: &Session) -> Result<Option<KernelTrace>, String> {
    match recovery::part(&session.dir) {
        Part::None => Ok(None),
        Part::Unreadable(d, why) => Err(format!(
            "the kernel trace {} is not exported: {why}",
            d.display()
        )),
        Part::Readable(d) => KernelTrace::open(&d)
            .map(Some)
            .map_err(|e| format!("the kernel trace {} is not exported: {e}", d.display())),
    }
}

/// Writes every scheduling event of `k` into `t` (the `sched` columns); returns the reader's
/// warnings.
pub fn write_sched(k: &KernelTrace, t: &mut Table) -> Result<Vec<String>, ExportError> {
    let mut events = k.events()?;
    while let Some(e) = events.next()? {
        let ts = k.ns(e.ts);
        let wake = |t: &mut Table, what: &str, w: &Wake| {
            t.row()
                .i64(ts)
                .i32(e.cpu as i32)
                .str(what)
                .i64(w.tid.into())
                .str(w.comm.as_str())
                .opt_i32(Some(w.prio))
                .opt_i64(None)
                .opt_i64(None)
                .opt_str(None)
                .opt_i32(None)
                .opt_i32(Some(w.target_cpu))
                .opt_i32(None)
                .end()
        };
        match &e.event {
            Event::SchedSwitch(s) => t
                .row()
                .i64(ts)
                .i32(e.cpu as i32)
                .str("switch")
                .i64(s.prev_tid.into())
                .str(s.prev_comm.as_str())
                .opt_i32(Some(s.prev_prio))
                .opt_i64(Some(s.prev_state))
                .opt_i64(Some(s.next_tid.into()))
                .opt_str(Some(s.next_comm.as_str()))
                .opt_i32(Some(s.next_prio))
                .opt_i32(None)
                .opt_i32(None)
                .end()?,
            Event::SchedWaking(w) => wake(t, "waking", w)?,
            Event::SchedWakeup(w) => wake(t, "wakeup", w)?,
            Event::SchedWakeupNew(w) => wake(t, "wakeup_new", w)?,
            Event::SchedMigrateTask(m) => t
                .row()
                .i64(ts)
                .i32(e.cpu as i32)
                .str("migrate")
                .i64(m.tid.into())
                .str(m.comm.as_str())
                .opt_i32(Some(m.prio))
                .opt_i64(None)
                .opt_i64(None)
                .opt_str(None)
                .opt_i32(None)
                .opt_i32(Some(m.dest_cpu))
                .opt_i32(Some(m.orig_cpu))
                .end()?,
            Event::SchedProcessFork(f) => t
                .row()
                .i64(ts)
                .i32(e.cpu as i32)
                .str("fork")
                .i64(f.parent_tid.into())
                .str(f.parent_comm.as_str())
                .opt_i32(None)
                .opt_i64(None)
                .opt_i64(Some(f.child_tid.into()))
                .opt_str(Some(f.child_comm.as_str()))
                .opt_i32(None)
                .opt_i32(None)
                .opt_i32(None)
                .end()?,
            Event::SchedProcessExit(x) => t
                .row()
                .i64(ts)
                .i32(e.cpu as i32)
                .str("exit")
                .i64(x.tid.into())
                .str(x.comm.as_str())
                .opt_i32(Some(x.prio))
                .opt_i64(None)
                .opt_i64(None)
                .opt_str(None)
                .opt_i32(None)
                .opt_i32(None)
                .opt_i32(None)
                .end()?,
            _ => {}
        }
    }
    Ok(events
        .take_warnings()
        .iter()
        .map(|w| w.to_string())
        .collect())
}

/// Writes the traced threads' states into `t` (the `thread_state` columns): for each thread
/// of `threads` the kernel saw, its off-CPU stretches as `blocked` and `runnable` intervals
/// (who woke it; who ran on the CPU it waited for, largest first), and the `running`
/// intervals between them.
pub fn write_thread_state(
    session: &Session,
    k: &KernelTrace,
    threads: &BTreeMap<(u32, u32), ThreadAcc>,
    t: &mut Table,
) -> Result<(), ExportError> {
    let roots: Vec<i32> = session
        .traces
        .iter()
        .filter_map(|t| i32::try_from(t.desc.vpid).ok())
        .collect();
    let tl = Timeline::build(k, Some(&roots))?;
    for &(pid, tid) in threads.keys() {
        let Ok(task) = i32::try_from(tid) else {
            continue;
        };
        let offs = tl.off_cpu(task);
        let (Some(first), Some(last)) = (offs.first(), offs.last()) else {
            continue;
        };
        let x = tl.explain(task, first.start, last.end);
        let mut back: Option<(i64, u32)> = None;
        let mut o = offs.iter().peekable();
        for iv in &x.intervals {
            // Running from the end of the previous stretch to the start of this one.
            while let Some(off) = o.peek() {
                if off.start > iv.start {
                    break;
                }
                if let Some((since, cpu)) = back.take() {
                    if since < off.start {
                        state_row(
                            t,
                            &tl,
                            pid,
                            tid,
                            "running",
                            since,
                            Some(off.start),
                            cpu,
                            &[],
                            None,
                        )?;
                    }
                }
                back = (off.end != i64::MAX).then_some((off.end, off.back_cpu));
                o.next();
            }
            let state = if iv.runnable { "runnable" } else { "blocked" };
            let end = (iv.end != i64::MAX).then_some(iv.end);
            state_row(
                t,
                &tl,
                pid,
                tid,
                state,
                iv.start,
                end,
                iv.cpu,
                &iv.by,
                iv.syscall.as_deref(),
            )?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn state_row(
    t: &mut Table,
    tl: &Timeline,
    pid: u32,
    tid: u32,
    state: &str,
    start: i64,
    end: Option<i64>,
    cpu: u32,
    by: &[(Actor, i64)],
    syscall: Option<&str>,
) -> Result<(), ExportError> {
    let top = by.first().map(|(a, _)| a);
    let top_tid = match top {
        Some(Actor::Task(t)) => Some(i64::from(*t)),
        _ => None,
    };
    let mut json = Vec::new();
    for (i, (a, ns)) in by.iter().enumerate() {
        json.push(if i == 0 { b'[' } else { b',' });
        json.extend_from_slice(b"{\"who\":");
        crate::output::json_str(&mut json, &tl.describe(a));
        if let Actor::Task(t) = a {
            json.extend_from_slice(format!(",\"tid\":{t}").as_bytes());
        }
        json.extend_from_slice(format!(",\"ns\":{ns}}}").as_bytes());
    }
    if !json.is_empty() {
        json.push(b']');
    }
    let json = String::from_utf8(json).ok().filter(|j| !j.is_empty());
    t.row()
        .i64(pid.into())
        .i64(tid.into())
        .str(state)
        .i64(start)
        .opt_i64(end)
        .opt_i64(end.map(|e| e - start))
        .i32(cpu as i32)
        .opt_i64(top_tid)
        .opt_str(top.map(|a| tl.describe(a)).as_deref())
        .opt_str(json.as_deref())
        .opt_str(syscall)
        .end()
}
