//! Maximum-weight matching for pairing jobs: Muri's own blossom variant ([`muri`]), which
//! breaks ties as Muri's reference code does (its published numbers depend on which of several
//! equally heavy matchings it returns), and a matching over job shapes for large traces
//! ([`by_shape`], `policy.muri.matching = "fast"`).
//!
//! A networkx-faithful matcher lived here too; nothing but its own tests called it, so it was
//! removed (issue 27). Git history keeps it (`git log --all -- crates/policy/src/matching/tests.rs`).

pub mod by_shape;
pub mod muri;

#[cfg(test)]
mod fixture_json;
