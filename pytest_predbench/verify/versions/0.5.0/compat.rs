//! The library API that differs between versions: problemreductions 0.5.0's side
//! (staged as src/compat.rs; versions/0.6.0/compat.rs is the other side).

/// The problem a variant-level alias names (0.6.0's `3SAT` -> `KSatisfiability`): 0.5.0 has no
/// variant-level aliases, only problem-level ones (which `canonical` resolves itself).
pub fn variant_alias(_name: &str) -> Option<String> {
    None
}
