//! The reader threads: one per CPU, draining `trace_pipe_raw` page by page into a CTF stream file.

use super::*;

/// Starts one reader thread per CPU of `src`, writing `dir/channel<channel>_<cpu>`; they end
/// when `stop` is set and the buffers are empty.
pub(super) fn start_readers(
    src: &Source,
    dir: &Path,
    uuid: [u8; 16],
    stop: &Arc<AtomicBool>,
) -> Result<Vec<Reader>, Error> {
    let inst = &src.inst;
    let subbuf = tracefs::read(&inst.join("buffer_subbuf_size_kb"))
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(4096)
        .max(4096);
    let mut readers = Vec::new();
    for cpu in tracefs::cpus(inst)? {
        let pipe = inst.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
            .map_err(|e| Error::Other(format!("{}: {e}", pipe.display())))?;
        let channel = src.channel;
        let out = dir.join(format!("{}{channel}_{cpu}", ctf::STREAM_PREFIX));
        let w = StreamWriter::create(&out, uuid, u64::from(channel << 16 | cpu), cpu)?
            .with_classes(src.dec.classes.clone());
        let stop = stop.clone();
        let dec = src.dec.clone();
        let header = src.header;
        let h = std::thread::Builder::new()
            .name(format!("hushtrace-k{cpu}"))
            .spawn(move || read_cpu(file, pipe, w, &dec, &header, subbuf, &stop))
            .map_err(|e| Error::Other(format!("starting a reader thread: {e}")))?;
        readers.push(h);
    }
    Ok(readers)
}

/// Waits for `readers`: their statistics, and their errors.
pub(super) fn join_readers(readers: Vec<Reader>) -> (Vec<CpuStats>, Vec<String>) {
    let mut cpus = Vec::new();
    let mut errors = Vec::new();
    for h in readers {
        match h.join() {
            Ok(Ok(s)) => cpus.push(s),
            Ok(Err(e)) => errors.push(e),
            Err(_) => errors.push("a kernel reader thread panicked".into()),
        }
    }
    (cpus, errors)
}

fn read_cpu(
    file: std::fs::File,
    pipe: PathBuf,
    mut w: StreamWriter,
    dec: &Decoder,
    header: &PageHeader,
    subbuf: usize,
    stop: &AtomicBool,
) -> Result<CpuStats, String> {
    let cpu = w_cpu(&pipe);
    let mut st = CpuStats {
        cpu,
        ..CpuStats::default()
    };
    let mut buf = vec![0u8; subbuf];
    let mut last_pass = false;
    let mut file = file;
    let mut first_error = None;
    loop {
        let n = match io::Read::read(&mut file, &mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(format!("reading {}: {e}", pipe.display())),
        };
        if n > 0 {
            st.pages += 1;
            match Page::parse(&buf[..n], header) {
                Ok(page) => {
                    match page.missed {
                        None => {}
                        Some(Missed::Count(k)) => {
                            st.lost += k;
                            w.lost(k);
                        }
                        Some(Missed::Unknown) => {
                            st.lost += 1;
                            st.lost_uncounted += 1;
                            w.lost(1);
                        }
                    }
                    for r in page.records() {
                        match r {
                            Ok((ts, rec)) => {
                                dec.decode(rec, ts, &mut w).map_err(|e| e.to_string())?
                            }
                            Err(e) => {
                                first_error.get_or_insert(format!("{}: {e}", pipe.display()));
                                break;
                            }
                        }
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(format!("{}: {e}", pipe.display()));
                }
            }
            continue;
        }
        // Empty for now. After the stop, one more pass drains what came before it.
        if stop.load(Ordering::Acquire) {
            if last_pass {
                break;
            }
            last_pass = true;
            continue;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    w.flush().map_err(|e| e.to_string())?;
    st.events = w.written;
    st.reordered = w.reordered;
    match first_error {
        Some(e) => Err(format!("{e} ({} events read before it)", st.events)),
        None => Ok(st),
    }
}

fn w_cpu(pipe: &Path) -> u32 {
    pipe.parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_string_lossy().strip_prefix("cpu")?.parse().ok())
        .unwrap_or(0)
}
