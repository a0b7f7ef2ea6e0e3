//! Pinning and SCHED_FIFO for the test programs `rt_cycle` and `cpu_hog` (included by both
//! with `#[path]`: this crate has binaries only).

/// Pins the calling thread to `cpu` and, with `fifo`, makes it SCHED_FIFO at that priority.
pub fn pin(cpu: usize, fifo: Option<i32>) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and the calls get valid pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "sched_setaffinity(CPU {cpu}): {}",
                std::io::Error::last_os_error()
            ));
        }
        if let Some(prio) = fifo {
            let p = libc::sched_param {
                sched_priority: prio,
            };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
                return Err(format!(
                    "sched_setscheduler(FIFO {prio}): {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
    }
    Ok(())
}
