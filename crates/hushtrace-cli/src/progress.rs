//! The progress bar a conversion shows a person watching (`convert`, `view`): one look for
//! every command, fed by the converters' `(done, total)` stream-byte callbacks.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` stream bytes ("converting [====>   ] 12 MiB/40 MiB ... eta 3s"), with
/// the rate when `rate` is set.
pub fn bar(total: u64, rate: bool) -> ProgressBar {
    let template = if rate {
        "{spinner} converting [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
    } else {
        "{spinner} converting [{bar:40}] {bytes}/{total_bytes} eta {eta}"
    };
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// The converters' progress callback for `bar` (does nothing without one).
pub fn callback(bar: &Option<ProgressBar>) -> impl FnMut(u64, u64) + '_ {
    move |done, total| {
        if let Some(b) = bar {
            b.set_length(total);
            b.set_position(done);
        }
    }
}
