//! Records the kernel for a given time into a directory: `kcapture DIR [SECONDS] [CATS]`.
fn main() {
    let mut a = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(a.next().expect("usage: kcapture DIR [SECONDS] [CATS]"));
    let secs: f64 = a.next().map_or(1.0, |s| s.parse().expect("seconds"));
    let cats = hushtrace_kernel::parse_categories(&a.next().unwrap_or_default()).unwrap();
    let opts = hushtrace_kernel::Options {
        categories: cats,
        ..Default::default()
    };
    let cap = match hushtrace_kernel::Capture::start(&dir, &opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kcapture: {e}");
            std::process::exit(2);
        }
    };
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg("ls / >/dev/null")
        .status();
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    let s = cap.finish(None).unwrap();
    println!("{s:#?}");
}
