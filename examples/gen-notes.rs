//! `cargo run --release --example gen-notes -- --notes 10000 --seed 1 --out /tmp/vault10k [--git]`:
//! writes a synthetic notes vault, the same bytes for the same seed and options
//! (see benches/support/vault.rs for what a vault holds), and prints a summary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "../benches/support/vault.rs"]
mod vault;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Writes a deterministic synthetic vault of markdown notes.
#[derive(Debug, Parser)]
#[command(name = "gen-notes")]
struct Args {
    /// How many notes.
    #[arg(long)]
    notes: usize,
    /// The seed: the same seed and options give the same files.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The folder to write (missing or empty).
    #[arg(long)]
    out: PathBuf,
    /// Make the folder a git repository with the notes committed (fixed author and dates).
    #[arg(long)]
    git: bool,
    /// Spread the notes over this many commits (with --git).
    #[arg(long, default_value_t = 1)]
    commits: usize,
    /// Notes with YAML front matter, per thousand.
    #[arg(long, default_value_t = 600)]
    front_matter_permille: u32,
    /// Words that are wikilinks, per thousand (0: no links).
    #[arg(long, default_value_t = 30)]
    link_permille: u32,
    /// Notes with CRLF line ends, per thousand.
    #[arg(long, default_value_t = 10)]
    crlf_permille: u32,
    /// Notes without a final newline, per thousand.
    #[arg(long, default_value_t = 50)]
    no_eol_permille: u32,
    /// Largest note, in bytes.
    #[arg(long, default_value_t = 200_000)]
    max_note_bytes: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = vault::Options {
        front_matter_permille: args.front_matter_permille,
        link_permille: args.link_permille,
        crlf_permille: args.crlf_permille,
        no_eol_permille: args.no_eol_permille,
        max_note_bytes: args.max_note_bytes,
        ..vault::Options::new(args.notes, args.seed)
    };
    let summary = match vault::generate(&args.out, &options) {
        Ok(summary) => summary,
        Err(e) => {
            eprintln!("gen-notes: cannot write {}: {e}", args.out.display());
            return ExitCode::from(2);
        }
    };
    if args.git {
        if let Err(e) = vault::commit(&args.out, args.commits) {
            eprintln!("gen-notes: cannot commit the notes: {e}");
            return ExitCode::from(1);
        }
    }
    eprintln!(
        "gen-notes: {} notes, {:.1} MB in {} folders (median {} B, p90 {} B, max {} B), {} wikilinks{}",
        summary.notes,
        summary.bytes as f64 / 1e6,
        summary.folders,
        summary.median_bytes,
        summary.p90_bytes,
        summary.max_bytes,
        summary.links,
        if args.git { ", committed" } else { "" }
    );
    ExitCode::SUCCESS
}
