//! Constructor checks for `validate`.
//!
//! `registry::load_dyn` only runs serde, which (for most types) skips the asserts
//! and `Err` returns of the public constructors. To apply the library's own rules we
//! take the loaded problem's fields (its re-serialized JSON) and feed them, by field
//! name, to a public constructor; argument types are inferred from the constructor's
//! signature. The table itself (`checks_table.rs`) is generated from the library
//! source by `gen_checks.py`; the few hand-written entries are at the bottom here.

use problemreductions::models::{algebraic::*, formula::*, graph::*, misc::*, set::*, Decision};
use problemreductions::topology::*;
use problemreductions::types::One;
use problemreductions::variant::{K2, K3, K4, K5, KN};
use problemreductions::Problem;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Outer `Err`: the arguments could not be recovered (a gap in this tool, not in the
/// instance). Inner `Err`: the constructor rejected the instance. Inner `Ok`: the
/// re-built problem, serialized.
pub type Run = fn(&Map<String, Value>) -> Result<Result<Value, String>, String>;

pub struct Check {
    pub name: &'static str,
    pub variant: fn() -> Vec<(&'static str, &'static str)>,
    pub ctor: &'static str,
    pub run: Run,
}

/// Deserialize one constructor argument from the field of the same name.
fn arg<T: DeserializeOwned>(m: &Map<String, Value>, field: &str) -> Result<T, String> {
    let v = m
        .get(field)
        .ok_or_else(|| format!("field `{field}` missing"))?;
    serde_json::from_value(v.clone()).map_err(|e| format!("field `{field}`: {e}"))
}

/// The whole problem, typed (for hand-written checks that use getters).
fn whole<T: DeserializeOwned>(m: &Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(m.clone())).map_err(|e| e.to_string())
}

fn ser<T: serde::Serialize>(p: &T) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

macro_rules! check {
    ($ty:ty, $ctor:expr, $run:expr) => {
        Check {
            name: <$ty as Problem>::NAME,
            variant: <$ty as Problem>::variant,
            ctor: $ctor,
            run: $run,
        }
    };
}

/// `assert Type => ctor(fields..);` constructor returns `Self` and panics on bad input.
/// `result Type => ctor(fields..);` constructor returns `Result<Self, String>`.
macro_rules! checks {
    ($($kind:ident $ty:ty => $ctor:ident ($($arg:ident),*);)*) => {
        fn generated() -> Vec<Check> { vec![$(checks!(@one $kind $ty => $ctor ($($arg),*))),*] }
    };
    (@one assert $ty:ty => $ctor:ident ($($arg:ident),*)) => {
        check!($ty, concat!(stringify!($ty), "::", stringify!($ctor)),
            |m| Ok(Ok(ser(&<$ty>::$ctor($(arg(m, stringify!($arg))?),*)))))
    };
    (@one result $ty:ty => $ctor:ident ($($arg:ident),*)) => {
        check!($ty, concat!(stringify!($ty), "::", stringify!($ctor)),
            |m| Ok(<$ty>::$ctor($(arg(m, stringify!($arg))?),*).map(|p| ser(&p)).map_err(|e| e.to_string())))
    };
}

include!("checks_table.rs");

/// Types whose constructors cannot be driven by field name.
fn hand_written() -> Vec<Check> {
    vec![
        // `new<S: ToBigUint, T: ToBigUint>`: generic arguments, so go through the getters.
        check!(SubsetSum, "SubsetSum::new", |m| {
            let p: SubsetSum = whole(m)?;
            Ok(Ok(ser(&SubsetSum::new(
                p.sizes().to_vec(),
                p.target().clone(),
            ))))
        }),
        check!(SubsetProduct, "SubsetProduct::new", |m| {
            let p: SubsetProduct = whole(m)?;
            Ok(Ok(ser(&SubsetProduct::new(
                p.sizes().to_vec(),
                p.target().clone(),
            ))))
        }),
        // Stored as (labels, indices); the constructor takes the label sequence.
        check!(PaintShop, "PaintShop::from_strings", |m| {
            let labels: Vec<String> = arg(m, "car_labels")?;
            let idx: Vec<usize> = arg(m, "sequence_indices")?;
            let seq = idx.iter().map(|&i| {
                labels
                    .get(i)
                    .cloned()
                    .ok_or(format!("sequence index {i} out of range"))
            });
            match seq.collect::<Result<Vec<_>, _>>() {
                Ok(seq) => Ok(Ok(ser(&PaintShop::from_strings(seq)))),
                Err(e) => Ok(Err(e)),
            }
        }),
        // Unit-length variant: `new(num_tasks, ..)`; num_tasks is the length of `lengths`.
        check!(
            MinimumTardinessSequencing<One>,
            "MinimumTardinessSequencing<One>::new",
            |m| {
                let n = arg::<Vec<Value>>(m, "lengths")?.len();
                Ok(Ok(ser(&MinimumTardinessSequencing::<One>::new(
                    n,
                    arg(m, "deadlines")?,
                    arg(m, "precedences")?,
                ))))
            }
        ),
        // `Decision::new(inner, bound)` checks nothing itself; check `inner` with its own entry.
        check!(
            Decision<MinimumVertexCover<SimpleGraph, i32>>,
            "Decision::new + inner check",
            decision::<MinimumVertexCover<SimpleGraph, i32>>
        ),
        check!(
            Decision<MinimumDominatingSet<SimpleGraph, i32>>,
            "Decision::new + inner check",
            decision::<MinimumDominatingSet<SimpleGraph, i32>>
        ),
        check!(
            Decision<MinimumDominatingSet<SimpleGraph, One>>,
            "Decision::new + inner check",
            decision::<MinimumDominatingSet<SimpleGraph, One>>
        ),
        // Their `Deserialize` impls already call `try_new`, so loading *is* the check.
        check!(
            QuadraticCongruences,
            "Deserialize (calls QuadraticCongruences::try_new)",
            |m| Ok(whole::<QuadraticCongruences>(m).map(|p| ser(&p)))
        ),
        check!(
            QuadraticDiophantineEquations,
            "Deserialize (calls QuadraticDiophantineEquations::try_new)",
            |m| Ok(whole::<QuadraticDiophantineEquations>(m).map(|p| ser(&p)))
        ),
    ]
}

/// Check a `Decision<P>` by running P's own check on its `inner` field.
fn decision<P: Problem>(m: &Map<String, Value>) -> Result<Result<Value, String>, String> {
    let Some(Value::Object(inner)) = m.get("inner") else {
        return Err("field `inner` missing".into());
    };
    let c = find(
        P::NAME,
        &problemreductions::export::variant_to_map(P::variant()),
    )
    .ok_or("no check for inner type")?;
    Ok((c.run)(inner)?.map(|v| {
        let mut whole = m.clone();
        whole.insert("inner".into(), v);
        Value::Object(whole)
    }))
}

/// The check for an exact problem name + variant, if we have one.
pub fn find(name: &str, variant: &BTreeMap<String, String>) -> Option<Check> {
    generated().into_iter().chain(hand_written()).find(|c| {
        c.name == name && problemreductions::export::variant_to_map((c.variant)()) == *variant
    })
}

/// All covered `(name, variant, constructor)` triples (`pred-extract checks`).
pub fn covered() -> Vec<(String, BTreeMap<String, String>, &'static str)> {
    generated()
        .into_iter()
        .chain(hand_written())
        .map(|c| {
            (
                c.name.to_string(),
                problemreductions::export::variant_to_map((c.variant)()),
                c.ctor,
            )
        })
        .collect()
}
