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
use std::any::TypeId;
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

/// Deserialize one constructor argument from the field of the same name. A graph is rebuilt
/// through its own constructor first ([`rebuilt_graph`]): serde reads most graph types without
/// their constructor's checks, so the problem's constructor would otherwise get a graph the
/// library never builds.
fn arg<T: DeserializeOwned + 'static>(m: &Map<String, Value>, field: &str) -> Result<T, String> {
    let v = m
        .get(field)
        .ok_or_else(|| format!("field `{field}` missing"))?;
    let v = match rebuilt_graph(TypeId::of::<T>(), v) {
        Some(rebuilt) => rebuilt.map_err(|e| format!("field `{field}`: {e}"))?,
        None => v.clone(),
    };
    serde_json::from_value(v).map_err(|e| format!("field `{field}`: {e}"))
}

/// A graph whose `Deserialize` is derived (no constructor check), rebuilt through its public
/// constructor from the fields the constructor takes; None for a type that is no such graph.
/// A constructor's assert (an edge past the vertex count, too many edges for a planar graph)
/// panics here and makes the instance invalid; a stored field the constructor computes (a unit
/// disk graph's edges) comes out as the constructor computes it, and the rebuilt problem then
/// differs from the given one in that field.
fn rebuilt_graph(ty: TypeId, v: &Value) -> Option<Result<Value, String>> {
    fn rebuild<S: DeserializeOwned, G: serde::Serialize>(
        v: &Value,
        build: impl FnOnce(S) -> G,
    ) -> Result<Value, String> {
        let stored: S = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        Ok(ser(&build(stored)))
    }
    #[derive(serde::Deserialize)]
    struct UnitDisk {
        positions: Vec<(f64, f64)>,
        radius: f64,
    }
    #[derive(serde::Deserialize)]
    struct Bipartite {
        left_size: usize,
        right_size: usize,
        edges: Vec<(usize, usize)>,
    }
    #[derive(serde::Deserialize)]
    struct Mixed {
        num_vertices: usize,
        arcs: Vec<(usize, usize)>,
        edges: Vec<(usize, usize)>,
    }
    #[derive(serde::Deserialize)]
    struct Planar {
        inner: SimpleGraph,
    }
    #[derive(serde::Deserialize)]
    struct Grid {
        positions: Vec<(i32, i32)>,
    }
    Some(if ty == TypeId::of::<UnitDiskGraph>() {
        rebuild(v, |g: UnitDisk| UnitDiskGraph::new(g.positions, g.radius))
    } else if ty == TypeId::of::<BipartiteGraph>() {
        rebuild(v, |g: Bipartite| {
            BipartiteGraph::new(g.left_size, g.right_size, g.edges)
        })
    } else if ty == TypeId::of::<MixedGraph>() {
        rebuild(v, |g: Mixed| MixedGraph::new(g.num_vertices, g.arcs, g.edges))
    } else if ty == TypeId::of::<PlanarGraph>() {
        rebuild(v, |g: Planar| {
            PlanarGraph::new(g.inner.num_vertices(), g.inner.edges())
        })
    } else if ty == TypeId::of::<KingsSubgraph>() {
        rebuild(v, |g: Grid| KingsSubgraph::new(g.positions))
    } else if ty == TypeId::of::<TriangularSubgraph>() {
        rebuild(v, |g: Grid| TriangularSubgraph::new(g.positions))
    } else {
        return None;
    })
}

/// Every graph type of the library's topology, and how `validate` checks one: rebuilt through its
/// constructor ([`rebuilt_graph`]), or read by a `Deserialize` that calls the constructor itself.
pub fn graph_checks() -> Vec<(&'static str, &'static str)> {
    let rebuilt = "rebuilt through its constructor";
    let own = "its Deserialize calls its constructor";
    vec![
        ("BipartiteGraph", rebuilt),
        ("DirectedGraph", own),
        ("KingsSubgraph", rebuilt),
        ("MixedGraph", rebuilt),
        ("PlanarGraph", rebuilt),
        ("SimpleGraph", own),
        ("TriangularSubgraph", rebuilt),
        ("UnitDiskGraph", rebuilt),
    ]
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

/// `decisions! { P; .. }`: a check of `Decision<P>` for each P (see [`decision`]).
macro_rules! decisions {
    ($($inner:ty;)*) => {
        fn generated_decisions() -> Vec<Check> {
            vec![$(check!(Decision<$inner>, "Decision::new + inner check", decision::<$inner>)),*]
        }
    };
}

// Generated per library version (versions/V/checks_table.rs, staged as src/checks_table.rs).
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

/// Check a `Decision<P>` by running P's own check on its `inner` field: `Decision::new(inner,
/// bound)` checks nothing itself.
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

fn all() -> Vec<Check> {
    let mut checks = generated();
    checks.extend(generated_decisions());
    checks.extend(hand_written());
    checks
}

/// The check for an exact problem name + variant, if we have one.
pub fn find(name: &str, variant: &BTreeMap<String, String>) -> Option<Check> {
    all().into_iter().find(|c| {
        c.name == name && problemreductions::export::variant_to_map((c.variant)()) == *variant
    })
}

/// All covered `(name, variant, constructor)` triples (`pred-extract checks`).
pub fn covered() -> Vec<(String, BTreeMap<String, String>, &'static str)> {
    all()
        .into_iter()
        .map(|c| {
            (
                c.name.to_string(),
                problemreductions::export::variant_to_map((c.variant)()),
                c.ctor,
            )
        })
        .collect()
}
