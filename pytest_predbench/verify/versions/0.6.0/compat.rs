//! The library API that differs between versions: problemreductions 0.6.0's side
//! (staged as src/compat.rs; versions/0.5.0/compat.rs is the other side).

/// The problem a variant-level alias names (`3SAT` -> `KSatisfiability`, case-insensitive), as
/// pred 0.6.0's `resolve_alias` tries it before the problem-level aliases.
pub fn variant_alias(name: &str) -> Option<String> {
    problemreductions::registry::find_variant_by_alias(name).map(|(entry, _)| entry.name.to_string())
}
