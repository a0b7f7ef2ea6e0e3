//! The consumer thread's life cycle: its start (also in the child of a fork, where it did not
//! survive), and the throttle of thread registration when exited threads pile up.

use super::Consumer;
use crate::config::Error;
use crate::platform::{self, SignalBlock};
use crate::state::{self, ConsumerThread};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Name of the consumer thread.
pub(crate) const CONSUMER_THREAD_NAME: &str = "hushtrace-consumer";

/// Starts the consumer thread of this process: a raw `pthread_create` (see
/// `platform::spawn_raw`), so a fork child can start it even when another thread of the parent
/// held a lock of the standard library's thread machinery at the moment of the fork. The thread
/// blocks every asynchronous signal (an application handler, which may trace, never runs on
/// it) and uses no std thread API.
pub(crate) fn spawn(mut c: Consumer) -> Result<ConsumerThread, Error> {
    let thread = platform::spawn_raw(Box::new(move || {
        platform::block_signals_forever();
        platform::set_thread_name(CONSUMER_THREAD_NAME);
        c.sched_error = apply_sched(&c.shared.cfg);
        c.run();
    }))
    .map_err(|source| Error::Io {
        path: "hushtrace consumer thread".into(),
        source,
    })?;
    state::set_consumer_alive();
    Ok(ConsumerThread {
        pid: platform::getpid(),
        thread,
    })
}

/// Gives the calling thread (the consumer; the relay sender it starts inherits it) the
/// session's scheduling and CPUs, by default those of the thread that started the session
/// (the same in a fork child, whose consumer another thread may start). What the kernel
/// refused is said once on stderr, and returned for the control status; the thread then runs
/// as it would have.
fn apply_sched(cfg: &crate::config::Config) -> Option<String> {
    use crate::config::ConsumerSched;
    use platform::ThreadSched;
    let mut errors = Vec::new();
    let (starter_sched, starter_cpus) = &cfg.starter_sched;
    if let Some(cpus) = cfg.consumer_cpus.as_ref().or(starter_cpus.as_ref()) {
        if let Err(e) = platform::set_thread_cpus(cpus) {
            errors.push(format!(
                "{}={}: {e} (is every CPU online and allowed to this process?)",
                crate::env::CONSUMER_CPUS,
                crate::config::cpu_list_text(cpus)
            ));
        }
    }
    let sched = match cfg.consumer_sched {
        ConsumerSched::Inherit => *starter_sched,
        ConsumerSched::Fifo(p) => Some(ThreadSched::Fifo(p.into())),
        ConsumerSched::RoundRobin(p) => Some(ThreadSched::RoundRobin(p.into())),
        ConsumerSched::Nice(n) => Some(ThreadSched::Nice(n.into())),
    };
    if let Some(sched) = sched {
        if let Err(e) = platform::set_thread_sched(sched) {
            errors.push(format!(
                "{}={}: {e} (a real-time priority or a negative nice value needs CAP_SYS_NICE \
                 or a high enough `ulimit -r` / `ulimit -e`)",
                crate::env::CONSUMER_SCHED,
                cfg.consumer_sched
            ));
        }
    }
    if errors.is_empty() {
        return None;
    }
    let msg = errors.join("; ");
    eprintln!("hushtrace: the consumer thread keeps its scheduling: {msg}");
    Some(msg)
}

/// Wakes the consumer (threads that allow system calls). In the child of a fork, where the
/// consumer did not survive, starts a new one first.
pub(crate) fn wake() {
    if !state::wake_consumer() {
        ensure_running();
    }
}

/// Starts the consumer if this process has a session but no consumer (the child of a fork).
#[cold]
pub(crate) fn ensure_running() {
    if state::consumer_alive() {
        return;
    }
    let Some(s) = state::current_session() else {
        return;
    };
    if s.consumer_failed.load(Ordering::Relaxed) {
        return;
    }
    let _sig = SignalBlock::new();
    let mut slot = s.consumer.lock();
    if state::consumer_alive() {
        return;
    }
    match Consumer::create(s.clone()).and_then(spawn) {
        Ok(t) => *slot = Some(t),
        Err(e) => {
            s.note_error(e);
            s.consumer_failed.store(true, Ordering::Relaxed);
        }
    }
}

/// Above this many undrained buffers of exited threads, registering a new thread waits briefly
/// for the consumer, which bounds memory and open files when threads come and go faster than
/// the consumer runs.
const EXITED_HIGH_WATER: usize = 64;

/// Called before a new thread registers (system calls allowed): if the consumer is behind on
/// exited threads, wake it and wait up to 200 ms for it to catch up.
pub(crate) fn throttle_registration() {
    if !state::active() || state::exited_pending() <= EXITED_HIGH_WATER {
        return;
    }
    wake();
    let deadline = Instant::now() + Duration::from_millis(200);
    while state::exited_pending() > EXITED_HIGH_WATER / 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}
