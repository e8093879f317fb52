//! The watcher's fallback walk. Where file events do not arrive (bind
//! mounts, network shares), an outside change is found by the metadata walk
//! that runs every `WATCH_EVERY` (2 s) the watcher is idle, so it is seen
//! within that interval plus one walk; where events arrive, the same walk
//! runs after they settle. This measures the walk on a vault from the
//! project's generator, in this process on the live index (loaded, with its
//! link graph): unchanged (what every idle interval costs) and with one note
//! saved outside between walks (what an outside change waits for past the
//! interval), beside a baseline in the same run: the notes' metadata walk
//! alone (each note's size and time, which the walk compares).
//!
//! cargo bench --bench watch [-- NOTES]   (NOTES: how many notes, default 10,000)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "support/vault.rs"]
mod vault;

mod support;

use mirai::config::Config;
use mirai::notes::Notes;
use support::{report, time_ms};

const SAMPLES: usize = 30;

fn main() {
    let notes: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let summary = vault::generate(&root, &vault::Options::new(notes, 1)).unwrap();
    vault::commit(&root, 1).unwrap();
    println!(
        "vault: {} notes, {:.1} MB; interval between idle walks: {} ms",
        summary.notes,
        summary.bytes as f64 / 1e6,
        mirai::index::live::WATCH_EVERY.as_millis()
    );
    let ctx = mirai::app::context(Notes::open(&root).unwrap(), &Config::new(&root));
    ctx.index.rebuild(None).unwrap();
    ctx.index.vault().unwrap();

    let disk = ctx.view.disk_notes().clone();
    let mut listing: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| assert!(!disk.list_stats().unwrap().is_empty())))
        .collect();
    report("baseline: the notes' metadata walk alone", &mut listing);

    let mut idle: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| assert!(!ctx.index.sync_with_disk().unwrap())))
        .collect();
    let idle = report("fallback walk, nothing changed", &mut idle);

    let mut saved = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        std::fs::write(
            root.join(format!("outside-{i}.md")),
            format!(
                "# Outside {i}\n\nsaved beside mirai, see [[outside-{}]]\n",
                i + 1
            ),
        )
        .unwrap();
        saved.push(time_ms(|| assert!(ctx.index.sync_with_disk().unwrap())));
    }
    let one = report("fallback walk, one note saved outside", &mut saved);
    println!(
        "an outside change is seen within {} ms + {one:.0} ms where file events do not arrive \
         (idle walk {idle:.0} ms every {} ms)",
        mirai::index::live::WATCH_EVERY.as_millis(),
        mirai::index::live::WATCH_EVERY.as_millis()
    );
}
