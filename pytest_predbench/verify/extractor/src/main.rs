//! `pred-extract`: the predbench extractor.
//!
//! `pred` can reduce and solve, but (before 0.6.0) it cannot map an *arbitrary* target
//! configuration back to the source problem, and it never re-checks instances
//! against the library's constructor rules. The benchmark verifier needs both,
//! computed by exactly the same library code that `pred` runs, so this binary
//! drives the pinned `problemreductions` API (one exact version per build) the same way
//! `pred solve BUNDLE` does (`registry::load_dyn` -> `ReductionGraph::reduce_along_path`
//! -> `ReductionChain::extract_solution` -> `DynProblem::evaluate_dyn`).
//!
//! Subcommands (JSON on stdin, one JSON object on stdout):
//! * `extract`  - replay a `pred reduce` bundle and extract a target solution.
//! * `reduce`   - the target the library derives from a source along a path (where a panic of
//!   `pred reduce` is attributed: the rule's own code or not).
//! * `validate` - re-run the library's public constructor checks on a problem file.
//! * `dims`     - the configuration space of a problem file: each variable's domain size.
//! * `evaluate` - evaluate a configuration, as `pred evaluate` does (which cannot take an
//!   empty one, for a problem without variables).
//! * `rules`    - list the reduction edges compiled into this binary (same as `pred list --rules`).
//! * `checks`   - list the problem variants `validate` has a constructor check for.
//! * `graphs`   - the topology's graph types and how `validate` checks each.
//! * `canonical` - problem names (aliases included, e.g. `MVC`) as pred resolves them.
//!
//! And, for people and agents in a shell: `pred-extract BUNDLE.json --config 1,0,1` is
//! `extract` on that bundle file and target configuration.
//!
//! Exit codes: 0 = answered (including `valid: false`), 2 = bad input / usage,
//! 3 = the library failed during `extract` (a panic, or its re-derived target does not
//! serialize/load back).

use problemreductions::registry::{self, LoadedDynProblem};
use problemreductions::rules::{ReductionChain, ReductionGraph, ReductionPath, ReductionStep};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

mod checks;
mod compat;

/// The verifier never needs more; refusing larger input keeps memory bounded.
const MAX_STDIN: u64 = 16 * 1024 * 1024;

/// A failure that ends the program with a JSON error object.
struct Fail {
    code: i32,
    error: &'static str,
    message: String,
    stage: Option<&'static str>,
    /// Where a panic happened (see [`Panic`]), for a panic.
    panic: Option<Panic>,
}

fn usage(error: &'static str, message: impl Into<String>) -> Fail {
    Fail {
        code: 2,
        error,
        message: message.into(),
        stage: None,
        panic: None,
    }
}

/// `{"type", "variant", "data"}` exactly as `pred create` / `pred reduce` write it.
#[derive(Deserialize)]
struct ProblemJson {
    #[serde(rename = "type")]
    problem_type: String,
    #[serde(default)]
    variant: BTreeMap<String, String>,
    data: Value,
}

#[derive(Deserialize)]
struct Step {
    name: String,
    #[serde(default)]
    variant: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Bundle {
    source: ProblemJson,
    target: ProblemJson,
    path: Vec<Step>,
}

#[derive(Deserialize)]
struct ExtractInput {
    bundle: Bundle,
    target_solution: Vec<usize>,
}

/// What a panic was, recorded by our panic hook (it is put in the JSON output instead of the
/// default stderr dump): its message, the place it was raised, whether it is an arithmetic
/// overflow (this crate is built with overflow checks, README), and the innermost frame of a
/// rule's own code on the panicking stack, if any.
#[derive(Clone, Default)]
struct Panic {
    message: String,
    location: Option<String>,
    overflow: bool,
    rule_frame: Option<String>,
}

static LAST_PANIC: Mutex<Option<Panic>> = Mutex::new(None);

/// The library's own source files under `src/rules/` that are not the code of one rule: the
/// reduction graph that dispatches every rule (its frames are on every reduction's stack).
const RULE_MACHINERY: [&str; 5] = ["graph.rs", "traits.rs", "mod.rs", "analysis.rs", "cost.rs"];

/// A library path as `problemreductions-<version>/src/...` (any other path as it is).
fn library_path(file: &str) -> &str {
    file.find("problemreductions-").map_or(file, |i| &file[i..])
}

/// `problemreductions-X/src/rules/<file>` of one rule (not of the reduction graph's machinery).
fn is_rule_file(file: &str) -> bool {
    let path = library_path(file);
    let Some(rest) = path.split_once("/src/rules/").map(|(_, r)| r) else {
        return false;
    };
    path.starts_with("problemreductions-") && !RULE_MACHINERY.contains(&rest.split(':').next().unwrap_or(""))
}

/// The innermost frame of a rule's own code in a backtrace's text: frames come innermost first,
/// each `N: symbol` followed by `at FILE:LINE:COL` lines (line tables, inlined frames included).
fn rule_frame(backtrace: &str) -> Option<String> {
    let mut symbol = "";
    for line in backtrace.lines() {
        let t = line.trim();
        if let Some(file) = t.strip_prefix("at ") {
            if is_rule_file(file) {
                return Some(format!("{} ({symbol})", library_path(file)));
            }
        } else if let Some((_, name)) = t.split_once(": ") {
            symbol = name;
        } else {
            symbol = t;
        }
    }
    None
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        let location = info
            .location()
            .map(|l| format!("{}:{}", library_path(l.file()), l.line()));
        let backtrace = std::backtrace::Backtrace::force_capture().to_string();
        let overflow = message.starts_with("attempt to ") && message.contains("overflow");
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(Panic {
            message,
            location,
            overflow,
            rule_frame: rule_frame(&backtrace),
        });
    }));
}

impl Panic {
    /// The message with its place, e.g. `... (at problemreductions-0.6.0/src/models/x.rs:72)`.
    fn text(&self) -> String {
        match &self.location {
            Some(l) => format!("{} (at {l})", self.message),
            None => self.message.clone(),
        }
    }

    fn json(&self) -> Value {
        json!({"location": self.location, "overflow": self.overflow, "rule_frame": self.rule_frame})
    }
}

/// Run library code; a panic becomes `Err(what it was)`.
fn guarded_panic<T>(f: impl FnOnce() -> T) -> Result<T, Panic> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| {
        LAST_PANIC
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| Panic {
                message: "panic".into(),
                ..Panic::default()
            })
    })
}

/// Run library code; a panic becomes `Err(message with its place)`.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    guarded_panic(f).map_err(|p| p.text())
}

/// Like [`guarded`] but a panic is a fatal `extract` error (exit 3) tagged with the stage.
fn stage<T>(name: &'static str, f: impl FnOnce() -> T) -> Result<T, Fail> {
    guarded_panic(f).map_err(|panic| Fail {
        code: 3,
        error: "panic",
        message: panic.text(),
        stage: Some(name),
        panic: Some(panic),
    })
}

/// Canonical problem name: exact names win, otherwise a variant-level alias (0.6.0 on), otherwise
/// the catalog's problem-level aliases (the same resolution order as pred's `resolve_alias`).
fn canonical(name: &str) -> String {
    if registry::find_problem_type(name).is_some() {
        return name.to_string();
    }
    if let Some(problem) = compat::variant_alias(name) {
        return problem;
    }
    registry::find_problem_type_by_alias(name)
        .map(|pt| pt.canonical_name.to_string())
        .unwrap_or_else(|| name.to_string())
}

/// `registry::load_dyn` (serde only, no constructor checks), as `pred` loads files.
/// Serde `Deserialize` impls of some types call constructors that assert, hence the guard.
/// The problem's canonical name, when the registry has its variant (else a usage error).
fn registered(p: &ProblemJson) -> Result<String, Fail> {
    let name = canonical(&p.problem_type);
    if registry::find_variant_entry(&name, &p.variant).is_none() {
        return Err(usage(
            "unknown_problem",
            format!(
                "no registered variant for `{name}` with variant {:?}",
                p.variant
            ),
        ));
    }
    Ok(name)
}

fn load(p: &ProblemJson, stage_name: &'static str) -> Result<LoadedDynProblem, Fail> {
    let name = registered(p)?;
    stage(stage_name, || {
        registry::load_dyn(&name, &p.variant, p.data.clone())
    })?
    .map_err(|e| usage("bad_problem", e))
}

/// Path step as `Name{key=value,...}`.
fn step_label(name: &str, variant: &BTreeMap<String, String>) -> String {
    let kv: Vec<String> = variant.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name}{{{}}}", kv.join(","))
}

/// Compare JSON after a text round trip through the same parser, so that floats the
/// library serialized compare equal to the same floats read back from a bundle file.
fn same_json(a: &Value, b: &Value) -> bool {
    let norm = |v: &Value| serde_json::from_str::<Value>(&v.to_string()).ok();
    norm(a).is_some() && norm(a) == norm(b)
}

/// The fields (sorted, each `field` or `field (given X, built Y)` when short) in which the
/// instance the constructor rebuilt differs from the one given.
fn differing_fields(rebuilt: &Value, given: &Map<String, Value>) -> Vec<String> {
    let empty = Map::new();
    let built = rebuilt.as_object().unwrap_or(&empty);
    let mut names: Vec<&String> = built.keys().chain(given.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| {
            !same_json(
                built.get(*name).unwrap_or(&Value::Null),
                given.get(*name).unwrap_or(&Value::Null),
            )
        })
        .map(|name| {
            let (g, b) = (
                given.get(name).unwrap_or(&Value::Null).to_string(),
                built.get(name).unwrap_or(&Value::Null).to_string(),
            );
            if g.len() + b.len() <= 120 {
                format!("`{name}` (given {g}, built {b})")
            } else {
                format!("`{name}`")
            }
        })
        .collect()
}

fn in_range(config: &[usize], dims: &[usize]) -> bool {
    config.len() == dims.len() && config.iter().zip(dims).all(|(v, d)| v < d)
}

/// The source loaded and reduced along `path` by the library (`reduce_along_path`), exactly as
/// `pred reduce --via` does: the loaded source, the canonical steps and the reduction chain.
fn replay(
    source: &ProblemJson,
    path: &[Step],
) -> Result<(LoadedDynProblem, Vec<ReductionStep>, ReductionChain), Fail> {
    if path.len() < 2 {
        return Err(usage("bad_bundle", "path must have at least two steps"));
    }
    let loaded = load(source, "load_source")?;
    let steps: Vec<ReductionStep> = path
        .iter()
        .map(|s| ReductionStep {
            name: canonical(&s.name),
            variant: s.variant.clone(),
        })
        .collect();
    // reduce_along_path downcasts the source to the first step's type and panics on a
    // mismatch, so check the start ourselves first.
    let first = &steps[0];
    if first.name != loaded.problem_name() || first.variant != loaded.variant_map() {
        return Err(usage(
            "bad_bundle",
            format!(
                "path starts at {} but source is {}",
                step_label(&first.name, &first.variant),
                step_label(loaded.problem_name(), &loaded.variant_map())
            ),
        ));
    }
    let graph = ReductionGraph::new();
    let route = ReductionPath {
        steps: steps.clone(),
    };
    let chain = stage("reduce", || graph.reduce_along_path(&route, loaded.as_any()))?
        .ok_or_else(|| {
            usage(
                "bad_path",
                "path is not a chain of witness-capable reduction edges",
            )
        })?;
    Ok((loaded, steps, chain))
}

#[derive(Deserialize)]
struct ReduceInput {
    source: ProblemJson,
    path: Vec<Step>,
}

/// `reduce`: the target the library derives from a source along a path, or where it panics.
fn reduce(input: &[u8]) -> Result<Value, Fail> {
    let inp: ReduceInput = serde_json::from_slice(input)
        .map_err(|e| usage("bad_json", format!("reduce input: {e}")))?;
    let (_, steps, chain) = replay(&inp.source, &inp.path)?;
    let last = &steps[steps.len() - 1];
    let data = stage("serialize_target", || {
        registry::serialize_any(&last.name, &last.variant, chain.target_problem_any())
    })?;
    Ok(json!({"target": {"type": last.name, "variant": last.variant, "data": data}}))
}

/// `canonical`: each name as pred resolves it (exact names first, then the catalog's aliases).
fn canonical_names(input: &[u8]) -> Result<Value, Fail> {
    let names: Vec<String> = serde_json::from_slice::<Map<String, Value>>(input)
        .ok()
        .and_then(|m| serde_json::from_value(m.get("names")?.clone()).ok())
        .ok_or_else(|| usage("bad_json", "canonical input: {\"names\": [...]}"))?;
    Ok(json!({"names": names.iter().map(|n| canonical(n)).collect::<Vec<_>>()}))
}

fn extract(input: &[u8]) -> Result<Value, Fail> {
    let inp: ExtractInput = serde_json::from_slice(input)
        .map_err(|e| usage("bad_json", format!("extract input: {e}")))?;
    let b = &inp.bundle;
    let (source, steps, chain) = replay(&b.source, &b.path)?;
    let last = &steps[steps.len() - 1];
    if last.name != canonical(&b.target.problem_type) || last.variant != b.target.variant {
        return Err(usage(
            "bad_bundle",
            "path does not end at the bundle's target type/variant",
        ));
    }

    // Re-derived target: serialize it and load it back as a dynamic problem to evaluate it.
    // Failing here means the library cannot round-trip its own output: exit 3 too.
    let lib_err = |stage: &'static str, message: String| Fail {
        code: 3,
        error: "library_error",
        message,
        stage: Some(stage),
        panic: None,
    };
    let target_data = stage("serialize_target", || {
        registry::serialize_any(&last.name, &last.variant, chain.target_problem_any())
    })?
    .ok_or_else(|| {
        lib_err(
            "serialize_target",
            "registry::serialize_any failed on the re-derived target".into(),
        )
    })?;
    let target_matches = same_json(&target_data, &b.target.data);
    let target = stage("load_target", || {
        registry::load_dyn(&last.name, &last.variant, target_data)
    })?
    .map_err(|e| {
        lib_err(
            "load_target",
            format!("re-derived target does not load back: {e}"),
        )
    })?;
    let tdims = target.dims_dyn();
    if !in_range(&inp.target_solution, &tdims) {
        return Err(usage("bad_target_solution", format!(
            "target_solution must have {} values, each below its dimension; got {} values (dims {:?})",
            tdims.len(), inp.target_solution.len(), tdims)));
    }
    let target_evaluation = stage("evaluate_target", || {
        target.evaluate_dyn(&inp.target_solution)
    })?;
    let source_solution = stage("extract_solution", || {
        chain.extract_solution(&inp.target_solution)
    })?;
    let source_in_range = in_range(&source_solution, &source.dims_dyn());
    let source_evaluation = stage("evaluate_source", || source.evaluate_dyn(&source_solution))?;
    Ok(json!({
        "source_solution": source_solution,
        "source_evaluation": source_evaluation,
        "source_solution_in_range": source_in_range,
        "target_evaluation": target_evaluation,
        "target_matches": target_matches,
        "path": steps.iter().map(|s| step_label(&s.name, &s.variant)).collect::<Vec<_>>(),
    }))
}

fn validate(input: &[u8]) -> Result<Value, Fail> {
    let p: ProblemJson = serde_json::from_slice(input)
        .map_err(|e| usage("bad_json", format!("problem file: {e}")))?;
    let name = registered(&p)?;
    let verdict = |valid: bool, checked: bool, reason: String, ctor: Option<&str>| json!({"valid": valid, "checked": checked, "reason": reason, "problem": step_label(&name, &p.variant), "constructor": ctor});
    // Step 1: serde loading. Some Deserialize impls validate (or assert) already.
    let loaded = match guarded(|| registry::load_dyn(&name, &p.variant, p.data.clone())) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => {
            return Ok(verdict(
                false,
                true,
                format!("load_dyn rejected the data: {e}"),
                None,
            ))
        }
        Err(msg) => {
            return Ok(verdict(
                false,
                true,
                format!("load_dyn panicked: {msg}"),
                None,
            ))
        }
    };
    // Step 2: rebuild through the public constructor from the loaded problem's fields.
    let Some(check) = checks::find(&name, &p.variant) else {
        return Ok(verdict(
            true,
            false,
            "loads; no public constructor check available for this type".into(),
            None,
        ));
    };
    let fields = match loaded.serialize_json() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Ok(match guarded(|| (check.run)(&fields)) {
        Ok(Ok(Ok(rebuilt))) => {
            // The constructor recomputes the fields it derives (a count, a label table) from its
            // arguments: an instance whose derived fields disagree with them is one the library
            // never builds, so it proves nothing about a rule (e.g. a QUBO of 10 variables with an
            // empty matrix).
            let differing = differing_fields(&rebuilt, &fields);
            let matches = differing.is_empty();
            let mut v = if matches {
                verdict(
                    true,
                    true,
                    "constructor accepted the instance".into(),
                    Some(check.ctor),
                )
            } else {
                let why = format!(
                    "{} builds a different instance from the same arguments: it differs in {}",
                    check.ctor,
                    differing.join(", ")
                );
                verdict(false, true, why, Some(check.ctor))
            };
            v["rebuilt_matches"] = json!(matches);
            v
        }
        Ok(Ok(Err(e))) => verdict(
            false,
            true,
            format!("constructor returned an error: {e}"),
            Some(check.ctor),
        ),
        Ok(Err(e)) => verdict(
            true,
            false,
            format!("loads; constructor arguments not recoverable: {e}"),
            Some(check.ctor),
        ),
        Err(msg) => verdict(
            false,
            true,
            format!("constructor panicked: {msg}"),
            Some(check.ctor),
        ),
    })
}

/// The configuration space of a problem: what brute force enumerates (the product of `dims`).
fn dims(input: &[u8]) -> Result<Value, Fail> {
    let p: ProblemJson = serde_json::from_slice(input)
        .map_err(|e| usage("bad_json", format!("problem file: {e}")))?;
    let problem = load(&p, "load_source")?;
    let dims = stage("dims", || problem.dims_dyn())?;
    Ok(json!({"num_variables": dims.len(), "dims": dims}))
}

#[derive(Deserialize)]
struct EvaluateInput {
    problem: ProblemJson,
    config: Vec<usize>,
}

/// The evaluation of one configuration (`Max(3)`, `Or(true)`, ...), as `pred evaluate` prints it.
fn evaluate(input: &[u8]) -> Result<Value, Fail> {
    let inp: EvaluateInput = serde_json::from_slice(input)
        .map_err(|e| usage("bad_json", format!("evaluate input: {e}")))?;
    let problem = load(&inp.problem, "load_source")?;
    let dims = problem.dims_dyn();
    if !in_range(&inp.config, &dims) {
        return Err(usage(
            "bad_config",
            format!(
                "config must have {} values, each below its dimension; got {} values (dims {:?})",
                dims.len(),
                inp.config.len(),
                dims
            ),
        ));
    }
    let evaluation = stage("evaluate", || problem.evaluate_dyn(&inp.config))?;
    // The value as the library serializes it: a float-valued problem's value is a JSON float.
    let value = stage("evaluate", || problem.evaluate_json(&inp.config))?;
    Ok(json!({"evaluation": evaluation, "value": value}))
}

/// `pred-extract BUNDLE.json --config 1,0,1`: `extract` with its input read from a bundle file.
fn extract_file(args: &[String]) -> Result<Value, Fail> {
    let [file, flag, config] = args else {
        return Err(usage(
            "usage",
            "usage: pred-extract BUNDLE.json --config 1,0,1",
        ));
    };
    if flag != "--config" {
        return Err(usage(
            "usage",
            "usage: pred-extract BUNDLE.json --config 1,0,1",
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_STDIN + 1).read_to_end(&mut bytes))
        .map_err(|e| usage("io", format!("{file}: {e}")))?;
    if bytes.len() as u64 > MAX_STDIN {
        return Err(usage("input_too_large", format!("{file} exceeds 16 MiB")));
    }
    let bundle: Value =
        serde_json::from_slice(&bytes).map_err(|e| usage("bad_json", format!("{file}: {e}")))?;
    let solution: Result<Vec<usize>, _> = config
        .split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.trim().parse::<usize>())
        .collect();
    let solution = solution.map_err(|_| {
        usage(
            "bad_target_solution",
            format!("--config {config}: not a list of numbers"),
        )
    })?;
    extract(
        json!({"bundle": bundle, "target_solution": solution})
            .to_string()
            .as_bytes(),
    )
}

/// Reduction edges compiled into this binary, in `pred list --rules` notation.
fn rules() -> Value {
    let graph = ReductionGraph::new();
    let slash = |n: &str, v: &BTreeMap<String, String>| {
        std::iter::once(n.to_string())
            .chain(v.values().cloned())
            .collect::<Vec<_>>()
            .join("/")
    };
    let mut types = graph.problem_types();
    types.sort();
    let rules: Vec<Value> = types
        .iter()
        .flat_map(|t| graph.outgoing_reductions(t))
        .map(|e| json!({"source": slash(e.source_name, &e.source_variant), "target": slash(e.target_name, &e.target_variant),
                        "witness": e.capabilities.witness}))
        .collect();
    json!({"num_rules": rules.len(), "rules": rules})
}

fn read_stdin() -> Result<Vec<u8>, Fail> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(MAX_STDIN + 1)
        .read_to_end(&mut buf)
        .map_err(|e| usage("io", e.to_string()))?;
    if buf.len() as u64 > MAX_STDIN {
        return Err(usage("input_too_large", "stdin exceeds 16 MiB"));
    }
    Ok(buf)
}

fn main() {
    install_panic_hook();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = args.first().cloned().unwrap_or_default();
    let result = match cmd.as_str() {
        "extract" => read_stdin().and_then(|b| extract(&b)),
        "validate" => read_stdin().and_then(|b| validate(&b)),
        "dims" => read_stdin().and_then(|b| dims(&b)),
        "evaluate" => read_stdin().and_then(|b| evaluate(&b)),
        "reduce" => read_stdin().and_then(|b| reduce(&b)),
        "canonical" => read_stdin().and_then(|b| canonical_names(&b)),
        "rules" => Ok(rules()),
        "graphs" => Ok(json!({"graphs": checks::graph_checks().iter()
            .map(|(g, how)| json!({"graph": g, "check": how})).collect::<Vec<_>>()})),
        "checks" => Ok(json!(checks::covered().iter()
            .map(|(n, v, c)| json!({"problem": step_label(n, v), "constructor": c})).collect::<Vec<_>>())),
        _ if args.len() == 3 => extract_file(&args),
        _ => Err(usage("usage", "usage: pred-extract BUNDLE.json --config 1,0,1, or pred-extract \
                       extract|reduce|validate|dims|evaluate|canonical|rules|checks|graphs (all but rules and checks read JSON on stdin)")),
    };
    match result {
        Ok(v) => println!("{v}"),
        Err(f) => {
            let mut v = json!({"error": f.error, "message": f.message});
            if let Some(s) = f.stage {
                v["stage"] = json!(s);
            }
            if let Some(p) = &f.panic {
                v["panic"] = p.json();
            }
            println!("{v}");
            std::process::exit(f.code);
        }
    }
}
